// Browser test of the NPSS example, in headless Chromium, against a hub running
// examples/npss/watch/rules.toml while a watch-dog runs the compressor solver with too large a
// relaxation factor. Usage: node npss.mjs URL SHOTS
// Prints "page ready" once the page is open (the test then starts the solver), and checks that
// the divergence pops up as an alert, that the Alerts panel and the watch-dog's steering log show
// the rule's restart, and that the spec's design points made gauges by themselves.
import { launch, newPage, script } from './browser.mjs';

const { args: { url, shots }, step, check } = script('npss', ['url', 'shots']);
const browser = await launch();
try {
  const page = await newPage(browser, { height: 1100, timeout: 90000 });
  await page.goto(url);
  await page.waitForSelector('#none');
  console.log('page ready');

  step('the divergence pops up as an alert');
  const toast = page.locator('.toast', { hasText: 'diverging' }).first();
  await toast.waitFor({ timeout: 90000 });
  check((await toast.textContent()).includes('ERROR'), 'the divergence is an error');
  await page.screenshot({ path: `${shots}/npss-alert.png`, fullPage: true });

  step('clicking it shows the watch-dog\'s program: its alerts and its steering log');
  await toast.click();
  await page.waitForFunction(() => /diverging/.test(document.getElementById('alerts').textContent));
  await page.waitForFunction(() => {
    const log = document.getElementById('log').textContent;
    return /rule restart-with-smaller-relaxation \(hub\)/.test(log) && /watched\.restart/.test(log);
  }, null, { timeout: 60000 });
  const log = await page.textContent('#log');
  check(/relax 0\.6/.test(log), `the restart halves the factor: ${log}`);

  step('the spec\'s design points made gauges by themselves');
  const gauge = page.locator('[data-testid="gauge"][data-key="compressor.residual/mdot"]');
  await gauge.waitFor({ timeout: 60000 });
  await page.waitForFunction(() => {
    const g = document.querySelector('[data-testid="gauge"][data-key="compressor.residual/mdot"]');
    return g && g.querySelector('[data-testid="gauge-design"]').value === '1.04';
  });
  await page.locator('#alerts').scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${shots}/npss-restart.png`, fullPage: true });
  await gauge.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${shots}/npss-gauges.png`, fullPage: true });
  console.log('npss: all checks passed');
} finally {
  await browser.close();
}
