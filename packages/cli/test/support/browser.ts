/** The browser of the page tests: Debian's `chromium` (scripts/setup.sh installs it), or CHROMIUM_PATH. */
import { existsSync } from 'node:fs';

export function chromiumPath(): string {
  const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(path)) {
    throw new Error(`no Chromium at ${path}: run scripts/setup.sh (apt-get install chromium) or set CHROMIUM_PATH`);
  }
  return path;
}
