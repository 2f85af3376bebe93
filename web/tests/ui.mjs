// Browser tests of the web UI, in headless Chromium (Debian's), against a running hub that
// watches examples/nbody. Usage: node web/tests/ui.mjs URL SCREENSHOT_DIR
// Exits non-zero with the failed check's message; saves screenshots of the main views.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const [url, shots] = process.argv.slice(2);
if (!url || !shots) { console.error('usage: node ui.mjs URL SCREENSHOT_DIR'); process.exit(2); }
mkdirSync(shots, { recursive: true });
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

const started = Date.now();
const step = (what) => console.log(`ui: ${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
const check = (cond, msg) => { if (!cond) throw new Error(msg); };

const browser = await chromium.launch({
  executablePath,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const a = await (await browser.newContext({ viewport: { width: 1400, height: 1100 } })).newPage();
  const b = await (await browser.newContext({ viewport: { width: 1400, height: 1100 } })).newPage();
  a.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });

  step('the UI loads and lists the program');
  await a.goto(url);
  await a.waitForSelector('nav .prog', { timeout: 20000 });
  await a.waitForSelector('#conn.up');
  await a.waitForSelector('input[data-path="nbody.dt"]', { timeout: 20000 });

  step('charts update live');
  await a.waitForSelector('.chart[data-series$="/energy/total"]', { timeout: 20000 });
  const points = () => a.evaluate(() => {
    const id = [...S.series.keys()].find((k) => k.endsWith('/energy/total'));
    const s = S.series.get(id); return s ? s.x[s.x.length - 1] : 0;
  });
  const t0 = await points();
  await a.waitForFunction((t) => {
    const id = [...S.series.keys()].find((k) => k.endsWith('/energy/total'));
    const s = S.series.get(id); return s && s.x[s.x.length - 1] > t;
  }, t0, { timeout: 10000 });
  await a.waitForSelector('#bars .row', { timeout: 10000 });
  await a.screenshot({ path: `${shots}/overview.png`, fullPage: true });

  step('a second browser opens the same program');
  await b.goto(url);
  await b.waitForSelector('input[data-path="nbody.dt"]', { timeout: 20000 });

  step('setting an attribute changes the program, and the other browser sees it');
  const dt = a.locator('input[data-path="nbody.dt"]');
  await dt.fill('0.0005');
  await dt.press('Enter');
  await a.waitForSelector('[data-msg="nbody.dt"].ok-msg', { timeout: 10000 });
  await b.waitForFunction(() => document.querySelector('input[data-path="nbody.dt"]').value === '0.0005', null, { timeout: 10000 });
  await b.waitForFunction(() => document.querySelector('#log').textContent.includes('nbody.dt'), null, { timeout: 10000 });

  step('an out-of-range value shows a visible error and changes nothing');
  await dt.fill('5');
  await dt.press('Enter');
  const err = a.locator('[data-msg="nbody.dt"].err-msg');
  await err.waitFor({ timeout: 10000 });
  check((await err.textContent()).includes('out of range'), `error text: ${await err.textContent()}`);
  check(await err.isVisible(), 'the error is visible');
  await a.screenshot({ path: `${shots}/refused.png` });
  // The program kept its value: the other page (not the one typed into) still shows it.
  await new Promise((r) => setTimeout(r, 1000));
  check(await b.locator('input[data-path="nbody.dt"]').inputValue() === '0.0005', 'the value is unchanged');

  step('an actuator runs from its button');
  const bodies = Number(await a.locator('[data-path="nbody.bodies"]').textContent());
  const add = a.locator('.act', { has: a.locator('button[data-op="nbody.add_body"]') });
  const inputs = add.locator('input');
  const vals = ['3', '0', '0', '0', '0.5', '0', '0.001'];
  for (let i = 0; i < vals.length; i++) await inputs.nth(i).fill(vals[i]);
  await add.locator('button').click();
  await a.waitForFunction((n) => Number(document.querySelector('[data-path="nbody.bodies"]').textContent) === n + 1, bodies, { timeout: 10000 });

  step('pause and resume');
  await a.click('#pause');
  await a.waitForFunction(() => document.querySelector('#state').textContent.includes('paused'), null, { timeout: 10000 });
  await b.waitForFunction(() => document.querySelector('#state').textContent.includes('paused'), null, { timeout: 10000 });
  await a.screenshot({ path: `${shots}/paused.png` });
  await a.click('#resume');
  await a.waitForFunction(() => !document.querySelector('#state').textContent.includes('paused'), null, { timeout: 10000 });

  step('the command line steers too');
  await a.fill('#cli-input', 'set nbody.softening 0.07');
  await a.press('#cli-input', 'Enter');
  await a.waitForFunction(() => document.querySelector('#cli-out').textContent.includes('0.07'), null, { timeout: 10000 });
  await a.fill('#cli-input', 'warp 9');
  await a.press('#cli-input', 'Enter');
  await a.waitForFunction(() => document.querySelector('#cli-out').className.includes('err'), null, { timeout: 10000 });
  step('all checks passed');
} finally {
  await browser.close();
}
