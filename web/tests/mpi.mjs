// Browser test of the MPI panel, in headless Chromium, against a hub watching a four-rank ring
// job (crates/gyr-hub/tests/common/ranks.rs). Usage: node mpi.mjs URL PID SHOTS
// Checks that selecting a rank shows the panel with a bar per rank, a matrix whose hover
// names a pair's bytes and messages, and late senders and late receivers; saves screenshots.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const [url, pid, shots] = process.argv.slice(2);
if (!url || !pid || !shots) { console.error('usage: node mpi.mjs URL PID SCREENSHOT_DIR'); process.exit(2); }
mkdirSync(shots, { recursive: true });
const started = Date.now();
const step = (what) => console.log(`mpi: ${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
const check = (cond, msg) => { if (!cond) throw new Error(msg); };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  page.setDefaultTimeout(60000);
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });

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
  const job = await page.textContent('[data-testid="mpi-job"]');
  check(job.includes('ring-job') && job.includes('4 of 4 ranks'), `the panel names the job: ${job}`);
  check(/late sender/.test(await page.textContent('[data-testid="mpi-latest"]')), 'the latest late messages list a late sender');
  check(/0 → 1/.test(await page.textContent('[data-testid="mpi-late-senders"]')), 'rank 0 is a late sender to rank 1');
  check(/2 → 3/.test(await page.textContent('[data-testid="mpi-late-receivers"]')), 'rank 3 is a late receiver for rank 2');

  step('the matrix names the pair under the pointer');
  const panel = page.locator('[data-testid="mpi-panel"]');
  await panel.scrollIntoViewIfNeeded();
  const canvas = page.locator('[data-testid="mpi-matrix"]');
  const box = await canvas.boundingBox();
  // Row 0 (sender 0), column 1 (receiver 1): cells start 34 px in and are 70 px wide for 4 ranks.
  await page.mouse.move(box.x + 34 + 70 * 1.5, box.y + 34 + 70 * 0.5);
  await page.waitForFunction(() => /rank 0 → rank 1: .*KB in .* messages/.test(document.querySelector('[data-testid="mpi-hover"]').textContent));
  step(`hover: ${await page.textContent('[data-testid="mpi-hover"]')}`);
  await panel.screenshot({ path: `${shots}/mpi-panel.png` });

  step('the matrix shows messages when asked');
  await page.selectOption('[data-testid="mpi-metric"]', 'messages');
  await canvas.scrollIntoViewIfNeeded();
  const box2 = await canvas.boundingBox();
  await page.mouse.move(box2.x + 34 + 70 * 2.5, box2.y + 34 + 70 * 1.5);
  await page.waitForFunction(() => /rank 1 → rank 2/.test(document.querySelector('[data-testid="mpi-hover"]').textContent));
  await page.screenshot({ path: `${shots}/mpi-page.png`, fullPage: true });
  console.log('mpi: all checks passed');
} finally {
  await browser.close();
}
