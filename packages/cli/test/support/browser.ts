/** The browser of the page tests: Debian's `chromium` (scripts/setup.sh installs it), or CHROMIUM_PATH. */
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';

export function chromiumPath(): string {
  const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(path)) {
    throw new Error(`no Chromium at ${path}: run scripts/setup.sh (apt-get install chromium) or set CHROMIUM_PATH`);
  }
  return path;
}

/** Headless Chromium, as root allows it. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
}

/** A page that can reach loopback only: anything else (the UI's web fonts) is aborted. */
export async function loopbackPage(browser: Browser, width: number): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 800 } });
  await page.route(/^https?:\/\/(?!127\.0\.0\.1[:/]|localhost[:/])/, (route) => route.abort());
  return page;
}
