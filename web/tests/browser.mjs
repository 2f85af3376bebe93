// What every browser script under web/tests shares: Debian's Chromium started headless the same
// way (CHROMIUM overrides its path), pages of one size with generous timeouts (a shared 2-core
// machine can be slow: the checks are about what happens, not how fast), and the step/check
// helpers whose output the Rust tests read.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

/** Headless Chromium, with everything that would reach out of the machine switched off. */
export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

/**
 * A page in a context of its own, `height` pixels tall, whose errors fail the script: thrown,
 * or, with `exitOnError`, printed and exited on (for scripts whose output is a result, not
 * checks).
 */
export async function newPage(browser, { height = 1100, timeout = 60000, exitOnError = false } = {}) {
  const page = await (await browser.newContext({ viewport: { width: 1400, height } })).newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => {
    if (exitOnError) { console.error(`page error: ${e.message}`); process.exit(1); }
    throw new Error(`page error: ${e.message}`);
  });
  return page;
}

/**
 * The command line of a test script: `names` are its arguments in order (all required;
 * a missing one prints the usage and exits 2); a `shots` argument is created as a directory.
 * Returns the arguments by name, `step` (prints `NAME: SECONDS what`, read by the Rust side
 * when a test fails) and `check` (throws with `msg` unless `cond`).
 */
export function script(name, names) {
  const values = process.argv.slice(2);
  if (names.some((_, i) => !values[i])) {
    console.error(`usage: node ${name}.mjs ${names.map((n) => n.toUpperCase()).join(' ')}`);
    process.exit(2);
  }
  const args = Object.fromEntries(names.map((n, i) => [n, values[i]]));
  if (args.shots) mkdirSync(args.shots, { recursive: true });
  const started = Date.now();
  const step = (what) => console.log(`${name}: ${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
  const check = (cond, msg) => { if (!cond) throw new Error(msg); };
  return { args, step, check };
}
