// Browser test of the C example (examples/c) steered from the page, in headless Chromium,
// against a hub that discovered it. Usage: node ffi.mjs URL SCREENSHOT_DIR
// Sets heat.alpha, sees a refused value's error, runs the heat.reset actuator with an argument,
// then stops the program with heat.stop; the Rust side checks the program's output and trace.
import { launch, newPage, script } from './browser.mjs';

const { args: { url, shots }, step, check } = script('ffi', ['url', 'shots']);
const browser = await launch();
try {
  const page = await newPage(browser, { height: 1000 });

  step('the page lists the C program and its steerable attributes');
  await page.goto(url);
  await page.waitForSelector('input[data-path="heat.alpha"]');
  check(await page.locator('[data-path="heat.step"]').count() > 0, 'the read-only step is shown');

  step('setting heat.alpha changes the program');
  const alpha = page.locator('input[data-path="heat.alpha"]');
  await alpha.fill('0.4');
  await alpha.press('Enter');
  await page.waitForSelector('[data-msg="heat.alpha"].ok-msg', { state: 'attached' });
  await page.waitForFunction(() => document.querySelector('#log').textContent.includes('heat.alpha'));

  step('a value out of the declared range shows its error');
  await alpha.fill('0.9');
  await alpha.press('Enter');
  const err = page.locator('[data-msg="heat.alpha"].err-msg');
  await err.waitFor();
  check((await err.textContent()).includes('range'), `error text: ${await err.textContent()}`);
  await page.screenshot({ path: `${shots}/c-steered.png`, fullPage: true });

  step('the heat.reset actuator runs with its argument, at the program\'s synch point');
  const reset = page.locator('.act', { has: page.locator('button[data-op="heat.reset"]') });
  await reset.locator('input').first().fill('1000');
  await reset.locator('button').click();
  const answer = reset.locator('.ok-msg');
  await answer.waitFor();
  check((await answer.textContent()).includes('1000'), `the actuator's answer: ${await answer.textContent()}`);

  step('heat.stop ends the program');
  const stop = page.locator('.act', { has: page.locator('button[data-op="heat.stop"]') });
  await stop.locator('button').click();
  await stop.locator('.ok-msg').waitFor();
  await page.screenshot({ path: `${shots}/c-stopped.png`, fullPage: true });
  console.log('ffi: all checks passed');
} finally {
  await browser.close();
}
