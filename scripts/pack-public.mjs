// Packs every public package of the workspace with `pnpm pack` (workspace: ranges
// become real versions, as on publish) and returns a map of package name to tarball.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;

export function packPublic(destination) {
  const packed = new Map();
  for (const folder of readdirSync(join(root, 'packages'))) {
    const dir = join(root, 'packages', folder);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    if (manifest.private) continue;
    const before = new Set(readdirSync(destination));
    execFileSync('pnpm', ['pack', '--pack-destination', destination], { cwd: dir, stdio: 'ignore' });
    const file = readdirSync(destination).find((name) => !before.has(name));
    packed.set(manifest.name, join(destination, file));
  }
  return packed;
}
