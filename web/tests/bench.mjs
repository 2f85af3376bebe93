// The page under load, for `gyr-bench web`: opens the hub's page in headless Chromium (Debian's),
// opens four charts and two gauges on the synthetic program, lets it settle, then reads the
// page's own accounting (S.perf: ms per drawn frame, updates and bytes received) over SECONDS.
// Usage: node web/tests/bench.mjs URL SECONDS. Prints one JSON object.
import { chromium } from 'playwright-core';

const [url, secondsArg] = process.argv.slice(2);
const seconds = Number(secondsArg);
if (!url || !(seconds > 0)) { console.error('usage: node bench.mjs URL SECONDS'); process.exit(2); }
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

const browser = await chromium.launch({
  executablePath,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1100 } })).newPage();
  page.setDefaultTimeout(60000);
  page.on('pageerror', (e) => { console.error(`page error: ${e.message}`); process.exit(1); });
  await page.goto(url);
  await page.waitForSelector('nav .prog');
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
  console.log(JSON.stringify({ ...perf, seconds: (Date.now() - t0) / 1000 }));
} finally {
  await browser.close();
}
