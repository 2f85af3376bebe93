// The page under load, for `gyr-bench web`. Opens the hub's page in headless Chromium (Debian's)
// and reads the page's own accounting over SECONDS.
// Usage: node web/tests/bench.mjs URL SECONDS [--timeline PID THREADS]. Prints one JSON object.
// - Charts (the default): opens four charts and two gauges on the synthetic program, lets it
//   settle, then reads S.perf: ms per drawn frame, updates and bytes received.
// - --timeline: the thread life-time view of program PID (THREADS rows), while a scripted user
//   shows the whole run, zooms in with the wheel at a random time, pans with drags, scrolls
//   rows (shift+wheel, vertical drags) and zooms out again, one input every 16 ms; then reads
//   TL.perf: per tile drawn, ms from its bytes to drawn (parse and draw apart), ms from the
//   request to drawn, and its bytes.
import { launch, newPage } from './browser.mjs';

const [url, secondsArg, mode, pidArg, threadsArg] = process.argv.slice(2);
const seconds = Number(secondsArg);
if (!url || !(seconds > 0) || (mode && mode !== '--timeline')) {
  console.error('usage: node bench.mjs URL SECONDS [--timeline PID THREADS]');
  process.exit(2);
}
const browser = await launch();
try {
  const page = await newPage(browser, { exitOnError: true });
  await page.goto(url);
  await page.waitForSelector('nav .prog');
  const result = mode ? await timeline(page, Number(pidArg), Number(threadsArg)) : await charts(page);
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}

/** The charts and gauges of the synthetic program. */
async function charts(page) {
  // Every series of the program has arrived (200), and the threads are listed.
  await page.waitForFunction(() => S.series.size >= 200, null, { timeout: 60000 });
  const ids = await page.evaluate(() => [...S.series.keys()].filter((k) => !k.split('/')[1].startsWith('gyr.')));
  for (const id of ids.slice(0, 4)) {
    await page.selectOption('#series-pick', id);
    await page.click('#add-chart');
  }
  for (const id of ids.slice(4, 6)) {
    await page.selectOption('[data-testid="gauge-pick"]', id);
    await page.click('[data-testid="add-gauge"]');
  }
  await page.waitForTimeout(2000);
  await page.evaluate(() => { S.perf.frames = []; S.perf.messages = 0; S.perf.bytes = 0; S.perf.summaryBytes = 0; S.perf.pending = 0; });
  const t0 = Date.now();
  await page.waitForTimeout(seconds * 1000);
  const perf = await page.evaluate(() => ({
    frames_ms: S.perf.frames, messages: S.perf.messages, bytes: S.perf.bytes, summary_bytes: S.perf.summaryBytes,
    series: S.series.size,
  }));
  return { ...perf, seconds: (Date.now() - t0) / 1000 };
}

/** The life-time view of program `pid`, under a scripted user. */
async function timeline(page, pid, threads) {
  await page.waitForFunction(([p, n]) => {
    const t = window.TL && window.TL.tile();
    return t && t.pid === p && t.total_rows >= n;
  }, [pid, threads], { timeout: 120000 });
  const canvas = page.locator('[data-testid="tl-canvas"]');
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  // A point of the drawing area (right of the labels, above the time range line).
  const at = (fx, fy) => [box.x + 150 + (box.width - 151) * fx, box.y + (box.height - 23) * fy];
  // The same script in every run (SplitMix32-like).
  let seed = 0x67797221;
  const rnd = () => {
    seed = (seed + 0x9e3779b9) | 0;
    let z = seed;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return ((z ^ (z >>> 16)) >>> 0) / 4294967296;
  };
  let actions = 0;
  const pace = () => { actions += 1; return page.waitForTimeout(16); };
  const wheel = async (dy, n) => {
    for (let i = 0; i < n; i++) { await page.mouse.wheel(0, dy); await pace(); }
  };
  const drag = async (dx, dy) => {
    const [x, y] = at(0.3 + rnd() * 0.4, 0.3 + rnd() * 0.4);
    await page.mouse.move(x, y);
    await page.mouse.down();
    for (let i = 1; i <= 10; i++) { await page.mouse.move(x + (dx * i) / 10, y + (dy * i) / 10); await pace(); }
    await page.mouse.up();
  };
  await page.evaluate(() => { for (const l of Object.values(window.TL.perf)) l.length = 0; });
  const t0 = Date.now();
  while (Date.now() - t0 < seconds * 1000) {
    await page.click('[data-testid="tl-fit"]');
    await pace();
    await page.mouse.move(...at(rnd(), rnd()));
    await wheel(-200, 12); // zoom in about 120 times
    await drag(-300 + rnd() * 600, 0); // pan in time
    await page.keyboard.down('Shift');
    await wheel(rnd() < 0.5 ? -100 : 100, 6); // scroll rows
    await page.keyboard.up('Shift');
    await drag(rnd() * 100 - 50, rnd() < 0.5 ? -120 : 120); // pan in time and rows
    await wheel(200, 6); // zoom out about 11 times
    await drag(200, 0);
  }
  const secs = (Date.now() - t0) / 1000;
  // The last tile asked for is drawn before the figures are read.
  await page.waitForTimeout(500);
  return page.evaluate(([secs, actions]) => {
    const p = window.TL.perf;
    const t = window.TL.tile();
    return {
      frames_ms: p.frames, parse_ms: p.parse, draw_ms: p.draw, trips_ms: p.trips, bytes: p.bytes,
      seconds: secs, actions,
      tile: {
        events: t.events, segments_forgotten: t.segments_forgotten, forced: t.forced, held: t.held,
        hold_back_ratio: t.hold_back_ratio, start_s: t.start_s, now_s: t.now_s, total_rows: t.total_rows,
      },
    };
  }, [secs, actions]);
}
