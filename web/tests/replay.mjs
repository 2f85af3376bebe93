// Browser tests of replay and token access, in headless Chromium, against a hub replaying a
// recording and guarded by a steer token and a read token.
// Usage: node web/tests/replay.mjs URL READ_TOKEN SCREENSHOT_DIR
import { launch, newPage, script } from './browser.mjs';

const { args: { url, readToken, shots }, step, check } = script('replay', ['url', 'readToken', 'shots']);
const browser = await launch();
try {
  const page = await newPage(browser, { height: 1100 });

  step('the guarded hub asks for a token, and refuses a wrong one');
  await page.goto(url);
  await page.waitForSelector('#token-form:not([hidden])', { timeout: 45000 });
  await page.screenshot({ path: `${shots}/token.png` });
  await page.fill('#token-input', 'wrong');
  await page.press('#token-input', 'Enter');
  await page.waitForFunction(() => document.querySelector('#token-error').textContent.includes('not valid'), null, { timeout: 30000 });

  step('the read token opens it, watch only');
  await page.fill('#token-input', readToken);
  await page.press('#token-input', 'Enter');
  await page.waitForSelector('#conn.up', { timeout: 45000 });
  await page.waitForSelector('#mode:not([hidden])');
  check((await page.textContent('#mode')).includes('watch only'), 'the page says it only watches');

  step('the replay plays');
  await page.waitForSelector('#replay-bar:not([hidden])', { timeout: 45000 });
  await page.waitForSelector('nav .prog', { timeout: 45000 });
  const pos = () => page.evaluate(() => S.replay.position_s);
  const p0 = await pos();
  await page.waitForFunction((p) => S.replay.position_s > p + 0.5, p0, { timeout: 30000 });
  await page.waitForFunction(() => [...S.series.values()].some((s) => s.x.length > 5), null, { timeout: 30000 });

  step('pause holds the position');
  await page.click('#replay-play');
  await page.waitForFunction(() => S.replay.paused, null, { timeout: 30000 });
  const held = await pos();
  await new Promise((r) => setTimeout(r, 700));
  check(Math.abs((await pos()) - held) < 1e-6, 'paused, yet the position moved');

  step('speed and scrub');
  await page.selectOption('#replay-speed', '5');
  await page.waitForFunction(() => S.replay.speed === 5, null, { timeout: 30000 });
  const dur = await page.evaluate(() => S.replay.duration_s);
  await page.evaluate((v) => {
    const r = document.querySelector('#replay-pos');
    r.value = String(v);
    r.dispatchEvent(new Event('input'));
    r.dispatchEvent(new Event('change'));
  }, dur * 0.8);
  await page.waitForFunction((v) => Math.abs(S.replay.position_s - v) < 0.5, dur * 0.8, { timeout: 30000 });
  await page.click('#replay-play');
  await page.waitForFunction(() => !S.replay.paused, null, { timeout: 30000 });
  await page.waitForFunction(() => [...S.series.values()].some((s) => s.x.length > 5), null, { timeout: 30000 });
  await page.screenshot({ path: `${shots}/replay.png`, fullPage: true });
  step('all checks passed');
} finally {
  await browser.close();
}
