// Browser test of the MPI panel, in headless Chromium, against a hub watching a four-rank ring
// job (crates/gyr-hub/tests/common/ranks.rs). Usage: node mpi.mjs URL PID SHOTS
// Checks that selecting a rank shows the panel with a bar per rank, a matrix whose hover
// names a pair's bytes and messages, and late senders and late receivers; then that the
// life-time view switches to the job's ranks, draws a row per rank with the MPI states and the
// messages as arrows, and names the message that ended a receive; saves screenshots.
import { launch, newPage, script } from './browser.mjs';

const { args: { url, pid, shots }, step, check } = script('mpi', ['url', 'pid', 'shots']);
const browser = await launch();
try {
  const page = await newPage(browser, { height: 1000 });

  step('selecting a rank shows the MPI panel');
  await page.goto(url);
  await page.waitForSelector(`nav .prog[data-pid="${pid}"]`, { timeout: 45000 });
  await page.click(`nav .prog[data-pid="${pid}"]`);
  await page.waitForSelector('[data-testid="mpi-panel"]:not([hidden])');
  await page.waitForFunction(() => {
    const v = window.MPI && window.MPI.view();
    return v && v.ranks.length === 4 && v.late_senders.length > 0 && v.late_receivers.length > 0;
  });
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="mpi-rank"]').length === 4);
  // A rank records gyr's events only: no chart of gyr's bookkeeping unasked, a hint instead.
  await page.waitForSelector('[data-testid="charts-empty"]:not([hidden])');
  check(await page.locator('#charts .chart').count() === 0, 'no chart is opened for a rank that has no series of its own');
  check(await page.locator('#bars .row').count() === 0 && await page.inputValue('#group-pick') === '',
    `no load balance of gyr's own events is shown unasked: ${await page.textContent('#bars')}`);
  const job = await page.textContent('[data-testid="mpi-job"]');
  check(job.includes('ring-job') && job.includes('4 of 4 ranks'), `the panel names the job: ${job}`);
  // The latest few late messages change as the job runs: a late sender shows among them.
  await page.waitForFunction(() => /late sender/.test(document.querySelector('[data-testid="mpi-latest"]').textContent));
  check(/0 → 1/.test(await page.textContent('[data-testid="mpi-late-senders"]')), 'rank 0 is a late sender to rank 1');
  check(/2 → 3/.test(await page.textContent('[data-testid="mpi-late-receivers"]')), 'rank 3 is a late receiver for rank 2');

  step('the matrix names the pair under the pointer');
  const panel = page.locator('[data-testid="mpi-panel"]');
  await panel.scrollIntoViewIfNeeded();
  const canvas = page.locator('[data-testid="mpi-matrix"]');
  const box = await canvas.boundingBox();
  // Row 0 (sender 0), column 1 (receiver 1): cells start 34 px in and are 70 px wide for 4 ranks.
  await page.mouse.move(box.x + 34 + 70 * 1.5, box.y + 34 + 70 * 0.5);
  await page.waitForFunction(() => /rank 0 → rank 1: .*[KM]B in .* messages/.test(document.querySelector('[data-testid="mpi-hover"]').textContent));
  step(`hover: ${await page.textContent('[data-testid="mpi-hover"]')}`);
  await panel.screenshot({ path: `${shots}/mpi-panel.png` });

  step('the matrix shows messages when asked');
  await page.selectOption('[data-testid="mpi-metric"]', 'messages');
  await canvas.scrollIntoViewIfNeeded();
  const box2 = await canvas.boundingBox();
  await page.mouse.move(box2.x + 34 + 70 * 2.5, box2.y + 34 + 70 * 1.5);
  await page.waitForFunction(() => /rank 1 → rank 2/.test(document.querySelector('[data-testid="mpi-hover"]').textContent));
  await page.screenshot({ path: `${shots}/mpi-page.png`, fullPage: true });

  step('the life-time view offers the job\'s ranks');
  await page.waitForSelector('[data-testid="tl-mode"]:not([hidden])');
  const offer = await page.textContent('[data-testid="tl-ranks"]');
  check(offer.includes('ring-job'), `the switch names the job: ${offer}`);
  await page.click('[data-testid="tl-ranks"]');
  await page.waitForFunction(() => {
    const t = window.TL.tile();
    return t && t.job === 'ring-job' && t.rows.length === 4 && t.arrows.length > 0
      && window.TL.drawn.mode === 'ranks' && window.TL.drawn.rows === 4 && window.TL.drawn.arrows > 0;
  });
  check(await page.getAttribute('[data-testid="tl-ranks"]', 'aria-pressed') === 'true', 'the ranks switch is pressed');
  check((await page.textContent('#tl-title')) === 'Rank life-times', 'the panel says it shows ranks');
  check(/message/.test(await page.textContent('[data-testid="tl-legend"]')), 'the legend keys the messages');
  const labels = await page.evaluate(() => window.TL.tile().rows.map((r) => r.label).join(','));
  check(labels === 'rank 0,rank 1,rank 2,rank 3', `a row per rank, in rank order: ${labels}`);
  const tl = page.locator('[data-testid="tl-canvas"]');
  await tl.scrollIntoViewIfNeeded();

  step('the canvas shows computing, receives, barriers and messages');
  // Pixels of each colour on the canvas (within a little, for antialiasing).
  const painted = await page.evaluate(() => {
    const c = document.querySelector('[data-testid="tl-canvas"]');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const want = { computing: [127, 191, 127], receive: [224, 90, 79], collective: [224, 195, 65], message: [16, 36, 62] };
    const n = Object.fromEntries(Object.keys(want).map((k) => [k, 0]));
    for (let i = 0; i < d.length; i += 4) {
      for (const [k, [r, g, b]] of Object.entries(want)) {
        if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 24) n[k]++;
      }
    }
    return n;
  });
  step(`pixels: ${JSON.stringify(painted)}`);
  for (const [k, n] of Object.entries(painted)) check(n > 20, `the canvas shows ${k}: ${n} pixels`);

  step('zoomed in, a click on a receive names the message that ended it');
  const tbox = await tl.boundingBox();
  await page.mouse.move(tbox.x + tbox.width * 0.6, tbox.y + 40);
  for (let i = 0; i < 4; i++) await page.mouse.wheel(0, -300);
  await page.waitForFunction(() => !window.TL.V.follow && window.TL.V.t1 - window.TL.V.t0 < 0.5);
  // One ring step, a second before the live end: rank 1 waits in MPI_Recv for rank 0.
  await page.evaluate(() => {
    const t = window.TL.tile();
    Object.assign(window.TL.V, { follow: false, t0: Math.max(0, t.now_s - 1.2), t1: Math.max(0.12, t.now_s - 1.08) });
    window.TL.refresh();
  });
  await page.waitForFunction(() => {
    const t = window.TL.tile();
    // The tile asked for just now, not one still on its way for the wheel's zoom.
    return t && Math.abs(t.t0_s - window.TL.V.t0) < 1e-9 && Math.abs(t.t1_s - window.TL.V.t1) < 1e-9
      && t.arrows.some((a) => a.sender === 0 && a.receiver === 1)
      && t.rows[1].runs.some((x) => x[2] === 2 && x[1] - x[0] >= 6);
  });
  const target = await page.evaluate(() => {
    const t = window.TL.tile();
    const c = document.querySelector('[data-testid="tl-canvas"]').getBoundingClientRect();
    const slack = (t.t1_s - t.t0_s) / t.width * 2;
    for (const [x0, x1, s] of t.rows[1].runs) {
      if (s !== 2 || x1 - x0 < 6) continue;
      const end = t.t0_s + (x1 / t.width) * (t.t1_s - t.t0_s);
      if (!t.arrows.some((a) => a.receiver === 1 && a.sender === 0 && Math.abs(a.recv_s - end) <= slack)) continue;
      const px = (x0 + x1) / 2;
      return { x: c.left + 150 + (px * (c.width - 150)) / t.width, y: c.top + 30 + 15 };
    }
    return null;
  });
  check(target, 'a receive of rank 1 ended by a message from rank 0, in view');
  await page.mouse.click(target.x, target.y);
  await page.waitForFunction(() => /rank 1: receive/.test(document.querySelector('[data-testid="tl-info"]').textContent));
  const info = await page.textContent('[data-testid="tl-info"]');
  step(`clicked: ${info}`);
  check(info.includes('MPI_Recv') && /from rank 0/.test(info), `the info names the call and the sender: ${info}`);
  await page.locator('#lifetimes-panel').screenshot({ path: `${shots}/mpi-ranks.png` });

  step('following the live end again keeps the zoomed span');
  await page.click('[data-testid="tl-follow"]');
  const from = await page.evaluate(() => window.TL.tile().now_s);
  await page.waitForFunction((f) => window.TL.V.follow && window.TL.tile().now_s > f + 3, from);
  const followed = await page.evaluate(() => window.TL.V.t1 - window.TL.V.t0);
  check(followed < 1.5, `the view follows with the span it had, not the time since: ${followed} s`);

  step('the switch goes back to the program\'s threads');
  await page.click('[data-testid="tl-threads"]');
  await page.waitForFunction(() => window.TL.V.mode === 'threads' && window.TL.drawn.mode === 'threads');
  check((await page.textContent('#tl-title')) === 'Thread life-times', 'the panel says it shows threads');
  console.log('mpi: all checks passed');
} finally {
  await browser.close();
}
