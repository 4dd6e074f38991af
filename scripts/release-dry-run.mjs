// Runs `pnpm publish --dry-run` for every public package, prints exactly the files
// each would ship, and fails if a tarball lacks a required file or carries a stray one.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const allowed = [
  /^package\.json$/,
  /^README\.md$/,
  /^firestore\.indexes\.json$/,
  /^LICENSE$/,
  /^CHANGELOG\.md$/,
  // Entry points (index, core's store kit, the CLI's bin) and the chunks they share.
  /^dist\/[\w.-]+\.(js|cjs|d\.ts|d\.cts)$/,
];
const required = [
  'package.json',
  'README.md',
  'LICENSE',
  'dist/index.js',
  'dist/index.cjs',
  'dist/index.d.ts',
  'dist/index.d.cts',
];
let failed = false;
// Every public package ships the full Apache-2.0 text, the same as the repository's.
const license = readFileSync(join(root, 'LICENSE'), 'utf8');
if (!license.includes('END OF TERMS AND CONDITIONS')) {
  failed = true;
  console.error('LICENSE is not the full Apache-2.0 text');
}

for (const folder of readdirSync(join(root, 'packages')).sort()) {
  const dir = join(root, 'packages', folder);
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  if (manifest.private) continue;
  const output = execFileSync('pnpm', ['publish', '--dry-run', '--no-git-checks', '--json'], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const report = Object.values(JSON.parse(output.slice(output.indexOf('{'))))[0];
  const files = report.files.map((file) => file.path).sort();
  console.log(`${manifest.name}@${manifest.version} would ship ${files.length} files:`);
  for (const file of files) console.log(`  ${file}`);
  if (readFileSync(join(dir, 'LICENSE'), 'utf8') !== license) {
    failed = true;
    console.error(`  ${folder}/LICENSE differs from the repository's LICENSE`);
  }
  const bins = Object.values(manifest.bin ?? {}).map((file) => file.replace(/^\.\//, ''));
  const missingBins = bins.filter((file) => !files.includes(file));
  if (missingBins.length) {
    failed = true;
    console.error(`  bin files not shipped: ${missingBins.join(', ')}`);
  }
  const stray = files.filter((file) => !allowed.some((pattern) => pattern.test(file)));
  const missing = required.filter((file) => !files.includes(file));
  if (stray.length || missing.length) {
    failed = true;
    console.error(`  stray: ${stray.join(', ') || 'none'}; missing: ${missing.join(', ') || 'none'}`);
  }
}
if (failed) process.exit(1);
console.log('release dry run: every public package ships exactly its build, README and the full LICENSE');
