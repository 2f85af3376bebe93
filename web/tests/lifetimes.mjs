// Browser test of the thread life-time view, in headless Chromium, against a hub watching a
// program whose threads contend for a gyr::sync::Mutex. Usage: node lifetimes.mjs URL SHOTS
// Checks that rows appear, that the wheel zooms and a drag pans, and that a click on a wait
// names the mutex and the thread that released it; saves screenshots.
import { launch, newPage, script } from './browser.mjs';

const { args: { url, shots }, step, check } = script('lifetimes', ['url', 'shots']);
const browser = await launch();
try {
  const page = await newPage(browser, { height: 1000 });

  step('the program\'s threads appear as rows');
  await page.goto(url);
  await page.waitForSelector('nav .prog', { timeout: 45000 });
  await page.waitForFunction(() => {
    const t = window.TL && window.TL.tile();
    return t && t.total_rows >= 5 && t.rows.some((r) => r.runs.some((x) => x[2] === 1));
  }, null, { timeout: 60000 });
  const canvas = page.locator('[data-testid="tl-canvas"]');
  await canvas.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${shots}/lifetimes-live.png`, fullPage: true });

  step('the wheel zooms in and stops following the live end');
  const box = await canvas.boundingBox();
  const span = () => page.evaluate(() => window.TL.V.t1 - window.TL.V.t0);
  const before = await span();
  await page.mouse.move(box.x + box.width * 0.7, box.y + 40);
  for (let i = 0; i < 6; i++) await page.mouse.wheel(0, -300);
  await page.waitForFunction((b) => !window.TL.V.follow && window.TL.V.t1 - window.TL.V.t0 < b * 0.5, before);
  check(await page.isEnabled('[data-testid="tl-follow"]'), '"Follow live" is offered once the view stopped following');

  step('a drag pans back in time');
  const t0 = await page.evaluate(() => window.TL.V.t0);
  await page.mouse.move(box.x + box.width * 0.5, box.y + 40);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.8, box.y + 40, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction((a) => window.TL.V.t0 < a, t0);

  step('zoomed in on the run, a click on a wait names the mutex and its releaser');
  // A window of 40 ms one second before the live end: few enough arrows to draw them all. On a
  // loaded machine a wait may outlast the window, its release out of view: the window then steps
  // back 40 ms at a time until one holds a wait and its release (found on the tile drawn).
  await page.evaluate(() => { window.__back = 0; });
  const found = await page.waitForFunction(() => {
    const t = window.TL.tile();
    // Only the tile of the window asked for last, with no other on its way: the click lands
    // on what was searched.
    const V = window.TL.V;
    if (t && t.t1_s - t.t0_s < 0.05 && t.t0_s === V.t0 && t.t1_s === V.t1 && !V.busy) {
      const c = document.querySelector('[data-testid="tl-canvas"]').getBoundingClientRect();
      for (let i = 0; i < t.rows.length; i++) {
        for (const [x0, x1, s, obj] of t.rows[i].runs) {
          if (s !== 1 || x1 - x0 < 4) continue;
          const ended = t.arrows.some((a) => t.rows[i].threads.includes(a.to_thread) && a.object === obj);
          if (!ended) continue;
          const px = (x0 + x1) / 2;
          return { x: c.left + 150 + px * (c.width - 150) / t.width, y: c.top + i * 18 + 9, obj };
        }
      }
    }
    const now = (t && t.now_s) || 1.04;
    const end = Math.max(0.04, now - 1.0 - 0.04 * window.__back++);
    Object.assign(window.TL.V, { follow: false, t0: end - 0.04, t1: end });
    window.TL.refresh();
    return null;
  }, null, { polling: 300, timeout: 60000 });
  const target = await found.jsonValue();
  check(target, 'a mutex wait whose release is in view');
  await page.mouse.click(target.x, target.y);
  await page.waitForFunction(() => /wait mutex/.test(document.querySelector('[data-testid="tl-info"]').textContent));
  const info = await page.textContent('[data-testid="tl-info"]');
  step(`clicked: ${info}`);
  check(info.includes(`wait mutex ${target.obj}`), `the info names mutex ${target.obj}: ${info}`);
  check(/released by thread \d+/.test(info), `the info names the thread that released it: ${info}`);
  await page.screenshot({ path: `${shots}/lifetimes-zoomed.png`, fullPage: true });
  await canvas.screenshot({ path: `${shots}/lifetimes-canvas.png` });
  console.log('lifetimes: all checks passed');
} finally {
  await browser.close();
}
