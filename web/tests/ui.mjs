// Browser tests of the web UI, in headless Chromium (Debian's), against a running hub that
// watches examples/nbody. Usage: node web/tests/ui.mjs URL SCREENSHOT_DIR
// Exits non-zero with the failed check's message; saves screenshots of the main views.
import { launch, newPage, script } from './browser.mjs';
import { writeFileSync } from 'node:fs';

const { args: { url, shots }, step, check } = script('ui', ['url', 'shots']);
const browser = await launch();
try {
  // A shared 2-core machine running the hub, three programs and two browsers can be slow:
  // the checks are about what happens, not how fast.
  const a = await newPage(browser);
  const b = await newPage(browser);

  step('the UI loads and lists the program');
  await a.goto(url);
  await a.waitForSelector('nav .prog', { timeout: 45000 });
  await a.waitForSelector('#conn.up');
  await a.waitForSelector('input[data-path="nbody.dt"]', { timeout: 45000 });

  step('charts update live');
  await a.waitForSelector('.chart[data-series$="/energy/total"]', { timeout: 45000 });
  const points = () => a.evaluate(() => {
    const id = [...S.series.keys()].find((k) => k.endsWith('/energy/total'));
    const s = S.series.get(id); return s ? s.x[s.x.length - 1] : 0;
  });
  const t0 = await points();
  await a.waitForFunction((t) => {
    const id = [...S.series.keys()].find((k) => k.endsWith('/energy/total'));
    const s = S.series.get(id); return s && s.x[s.x.length - 1] > t;
  }, t0, { timeout: 30000 });
  await a.waitForSelector('#bars .row', { timeout: 30000 });
  await a.screenshot({ path: `${shots}/overview.png`, fullPage: true });

  step('gauges: a design point, its mark and the deviation from it, kept across a reload');
  const gaugeFor = (key) => a.locator(`[data-testid="gauge"][data-key="${key}"]`);
  const addGauge = async (key) => {
    const id = await a.evaluate((k) => [...S.series.keys()].find((s) => s.endsWith(`/${k}`)), key);
    check(id, `a series for ${key}`);
    await a.selectOption('[data-testid="gauge-pick"]', id);
    await a.click('[data-testid="add-gauge"]');
    await gaugeFor(key).waitFor({ timeout: 30000 });
  };
  await addGauge('energy/total');
  const gauge = gaugeFor('energy/total');
  const needle = gauge.locator('[data-testid="gauge-needle"]');
  const needleValue = () => needle.getAttribute('data-value');
  await a.waitForFunction(() => document.querySelector('[data-key="energy/total"] [data-testid="gauge-needle"]').hasAttribute('data-value'), null, { timeout: 30000 });
  check(!(await gauge.locator('[data-testid="gauge-design-mark"]').isVisible()), 'no design mark before a design point is set');
  const design = gauge.locator('[data-testid="gauge-design"]');
  const gaugeErr = gauge.locator('[data-testid="gauge-error"]');
  await design.fill('eight');
  await design.press('Enter');
  await a.waitForFunction(() => document.querySelector('[data-key="energy/total"] [data-testid="gauge-error"]').textContent !== '', null, { timeout: 5000 });
  check((await gaugeErr.textContent()).includes('not a number') && await gaugeErr.isVisible(), `gauge error: ${await gaugeErr.textContent()}`);
  // A design point a fifth beyond the energy now: about 17% off, a warning.
  const energy = Number(await needleValue());
  check(Number.isFinite(energy) && energy !== 0, `the needle's value: ${energy}`);
  const target = Number((energy * 1.2).toPrecision(3));
  await design.fill(String(target));
  await design.press('Enter');
  await gauge.locator('[data-testid="gauge-design-mark"]').waitFor({ state: 'visible', timeout: 5000 });
  check(await gaugeErr.textContent() === '', 'the error is cleared');
  const label = await gauge.locator('[data-testid="gauge-design-label"]').textContent();
  check(label.startsWith('design ') && Number(label.slice(7)) === target, `design label: ${label}`);
  const dev = gauge.locator('[data-testid="gauge-deviation"]');
  check(/^[+-]1[5-9](\.\d)?% (over|under) design$/.test(await dev.textContent()), `deviation: ${await dev.textContent()}`);
  check((await dev.getAttribute('class')).includes('warn'), `deviation colour: ${await dev.getAttribute('class')}`);
  const v0 = await needleValue();
  await a.waitForFunction((v) => document.querySelector('[data-key="energy/total"] [data-testid="gauge-needle"]').getAttribute('data-value') !== v, v0, { timeout: 30000 });
  // Saved by type/field, so a reload (or a restarted program) gets the gauge and its design point back.
  const saved = await a.evaluate(() => JSON.parse(localStorage.getItem('gyr.gauges')));
  check(saved['energy/total']?.design === target, `saved: ${JSON.stringify(saved)}`);
  await a.reload();
  await gauge.locator('[data-testid="gauge-design-mark"]').waitFor({ state: 'visible', timeout: 45000 });
  check(await design.inputValue() === String(target), `design after reload: ${await design.inputValue()}`);
  await addGauge('energy/kinetic');
  await a.waitForFunction(() => document.querySelector('[data-key="energy/kinetic"] [data-testid="gauge-needle"]').hasAttribute('data-value'), null, { timeout: 30000 });
  // At the top of the window: the command line fixed at its bottom would cover the panel.
  const gaugePanel = a.locator('.panel', { has: a.locator('#gauges') });
  await gaugePanel.evaluate((e) => e.scrollIntoView({ block: 'start' }));
  await gaugePanel.screenshot({ path: `${shots}/gauges.png` });
  await gaugeFor('energy/kinetic').locator('[data-testid="gauge-remove"]').click();
  check(await gaugeFor('energy/kinetic').count() === 0, 'the removed gauge is gone');
  check(!('energy/kinetic' in await a.evaluate(() => JSON.parse(localStorage.getItem('gyr.gauges')))), 'and forgotten');

  step('a second browser opens the same program');
  await b.goto(url);
  await b.waitForSelector('input[data-path="nbody.dt"]', { timeout: 45000 });

  step('setting an attribute changes the program, and the other browser sees it');
  const dt = a.locator('input[data-path="nbody.dt"]');
  await dt.fill('0.0005');
  await dt.press('Enter');
  // The confirmation fades after 3 s: it is the class that says the set was accepted.
  await a.waitForSelector('[data-msg="nbody.dt"].ok-msg', { state: 'attached', timeout: 30000 });
  await b.waitForFunction(() => document.querySelector('input[data-path="nbody.dt"]').value === '0.0005', null, { timeout: 30000 });
  await b.waitForFunction(() => document.querySelector('#log').textContent.includes('nbody.dt'), null, { timeout: 30000 });

  step('an out-of-range value shows a visible error and changes nothing');
  await dt.fill('5');
  await dt.press('Enter');
  const err = a.locator('[data-msg="nbody.dt"].err-msg');
  await err.waitFor({ timeout: 30000 });
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
  await a.waitForFunction((n) => Number(document.querySelector('[data-path="nbody.bodies"]').textContent) === n + 1, bodies, { timeout: 30000 });

  step('pause and resume');
  await a.click('#pause');
  await a.waitForFunction(() => document.querySelector('#state').textContent.includes('paused'), null, { timeout: 30000 });
  await b.waitForFunction(() => document.querySelector('#state').textContent.includes('paused'), null, { timeout: 30000 });
  await a.screenshot({ path: `${shots}/paused.png` });
  await a.click('#resume');
  await a.waitForFunction(() => !document.querySelector('#state').textContent.includes('paused'), null, { timeout: 30000 });

  step('the command line steers too');
  await a.fill('#cli-input', 'set nbody.softening 0.07');
  await a.press('#cli-input', 'Enter');
  await a.waitForFunction(() => document.querySelector('#cli-out').textContent.includes('0.07'), null, { timeout: 30000 });
  await a.fill('#cli-input', 'warp 9');
  await a.press('#cli-input', 'Enter');
  await a.waitForFunction(() => document.querySelector('#cli-out').className.includes('err'), null, { timeout: 30000 });
  step('at 10 000 events/s per program the page keeps up');
  // The test starts its two load programs now (see crates/gyr-hub/tests/browser.rs).
  writeFileSync(`${shots}/start-load`, '');
  await a.waitForFunction(() => [...S.series.keys()].some((k) => k.endsWith('/load/value')), null, { timeout: 45000 });
  const loadPid = await a.evaluate(() => Number([...S.series.keys()].find((k) => k.endsWith('/load/value')).split('/')[0]));
  await a.click(`nav .prog[data-pid="${loadPid}"]`);
  await a.evaluate(() => { S.lags = []; });
  const x0 = await a.evaluate((pid) => { const s = S.series.get(`${pid}/load/value`); return s.x[s.x.length - 1]; }, loadPid);
  await new Promise((r) => setTimeout(r, 5000));
  const seen = await a.evaluate((pid) => {
    const s = S.series.get(`${pid}/load/value`);
    const p = S.processes.get(pid);
    return { lag: S.maxLag, n: S.lags.length, x: s.x[s.x.length - 1], rate: p.types.load.rate };
  }, loadPid);
  check(seen.n > 20, `the page got ${seen.n} updates in 5 s`);
  check(seen.lag < 5000, `the page fell ${seen.lag} ms behind`);
  check(seen.x > x0 + 3, `the load chart moved from ${x0} to ${seen.x}`);
  check(seen.rate > 5000, `the hub sees ${seen.rate} events/s from the program`);
  console.log(`ui: the page kept up: worst lag ${Math.round(seen.lag)} ms over ${seen.n} updates at ${Math.round(seen.rate)} events/s`);
  await a.screenshot({ path: `${shots}/load.png` });
  step('all checks passed');
} finally {
  await browser.close();
}
