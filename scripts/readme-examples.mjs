// Typechecks the TypeScript examples of the READMEs against the built packages, as a user's
// project would see them. Each ```ts block of a package's or an example's README (and of the root README, read
// from the memory adapter's folder, whose dependencies it names) becomes a module of its own in
// <package>/.tmp/readme-examples, resolved from that package: its own name (package self-reference)
// and its dependencies as installed. Fragments are welcome: a name the surrounding prose supplies
// (`firestore`, `events`, a signature listing), a module of the reader's own (`../src/index.js`)
// or one the workspace does not install (an OpenTelemetry SDK) is not an error. Everything else
// is: an export, a subpath, an option or a type that the packages no longer have.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const tsc = join(root, 'node_modules', '.bin', 'tsc');

/** Diagnostics that a fragment brings by leaving a part to the prose around it. */
const FRAGMENT_CODES = new Set([
  2304, // Cannot find name 'x'.
  2552, // Cannot find name 'x'. Did you mean 'y'?
  18004, // No value exists in scope for the shorthand property 'x'.
  2391, // Function implementation is missing (a signature listing).
  2371, // A parameter initializer is only allowed in an implementation (a signature listing).
]);

/** The ```ts blocks of a Markdown text, with the line each one's code starts on. */
function typescriptBlocks(text) {
  const blocks = [];
  const lines = text.split('\n');
  let start = -1;
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index];
    if (start < 0 && /^```ts\s*$/.test(line)) start = index + 1;
    else if (start >= 0 && /^```\s*$/.test(line)) {
      blocks.push({ line: start + 1, code: lines.slice(start, index).join('\n') });
      start = -1;
    }
  }
  return blocks;
}

/** Whether a diagnostic is one a fragment may carry (see the header). */
function allowed(code, message) {
  if (FRAGMENT_CODES.has(code)) return true;
  const module = /module '"?([^'"]+)"?'/i.exec(message)?.[1] ?? '';
  // A module of the reader's own, or one outside the workspace's packages that is not installed here.
  if (code === 2307) return !module.startsWith('@adk-state/');
  if (code === 2305) return module.startsWith('.') || module.startsWith('/');
  return false;
}

const sources = [{ readme: join(root, 'README.md'), home: join(root, 'packages', 'adapter-memory') }];
for (const folder of ['packages', 'examples']) {
  for (const name of readdirSync(join(root, folder)).sort()) {
    const home = join(root, folder, name);
    if (existsSync(join(home, 'README.md'))) sources.push({ readme: join(home, 'README.md'), home });
  }
}

let checked = 0;
const problems = [];
for (const { readme, home } of sources) {
  const blocks = typescriptBlocks(readFileSync(readme, 'utf8'));
  if (blocks.length === 0) continue;
  const label = relative(root, readme);
  const dir = join(home, '.tmp', 'readme-examples', label.replaceAll('/', '_'));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const block of blocks) {
    // Named after the README line its code starts on. `export {}` makes a block without imports a
    // module too (top-level await is allowed in one).
    writeFileSync(join(dir, `line-${block.line}.mts`), `${block.code}\nexport {};\n`);
  }
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules', '@types')],
      },
      include: ['*.mts'],
    }),
  );
  const result = spawnSync(tsc, ['-p', dir, '--pretty', 'false'], { encoding: 'utf8' });
  checked += blocks.length;
  for (const line of `${result.stdout}${result.stderr}`.split('\n')) {
    const found = /^(?:.*\/)?line-(\d+)\.mts\((\d+),\d+\): error TS(\d+): (.*)$/.exec(line);
    if (!found) {
      if (line.trim() !== '' && result.status !== 0 && !/^\s/.test(line)) problems.push(`${label}: ${line}`);
      continue;
    }
    const [, start, row, code, message] = found;
    if (allowed(Number(code), message)) continue;
    problems.push(`${label}:${Number(start) + Number(row) - 1}: TS${code} ${message}`);
  }
}

if (checked === 0) {
  console.error('readme examples: no ```ts block found');
  process.exit(1);
}
if (problems.length > 0) {
  console.error(`readme examples: ${problems.length} error(s) in the READMEs' code:`);
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
console.log(`readme examples: ${checked} TypeScript blocks typecheck against the built packages`);
