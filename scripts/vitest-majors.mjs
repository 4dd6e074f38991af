// The published suite on every vitest major it claims. For each major, a scratch project
// outside the workspace installs the packed @adk-state/core and @adk-state/conformance-tests
// plus that vitest exactly as the suite's README says (npm install -D …), must see no peer
// warning and a clean `npm ls`, and then runs the example store's conformance test
// (examples/custom-adapter) with it: on this machine's Node, or on Node 22 for vitest 5
// (which needs Node 22.12 or later). The newest vitest is also installed with pnpm, which
// must not warn about peers either. Results join .tmp/test-results.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packPublic } from './pack-public.mjs';
import { nodeBinaries } from './smoke/node-versions.mjs';

const root = new URL('..', import.meta.url).pathname;
const example = join(root, 'examples', 'custom-adapter');
/** Every vitest major the suite's peer range names, and the lowest Node it runs on here. */
const MAJORS = [
  { vitest: '2', node: '20' },
  { vitest: '3', node: '20' },
  { vitest: '4', node: '20' },
  { vitest: '5', node: '22' },
];
const only = process.argv.slice(2);
const scratch = mkdtempSync(join(tmpdir(), 'adk-state-vitest-'));

/** Runs a command; returns its stdout and stderr together, or throws with them when it fails. */
function run(command, args, options) {
  return runParts(command, args, options).output;
}

function runParts(command, args, options) {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} failed (${result.status}) in ${options.cwd}:\n${output}`);
  }
  return { stdout: result.stdout, output };
}

/** Lines of npm or pnpm output that speak of peer dependencies. */
function peerWarnings(output) {
  return output
    .split('\n')
    .filter((line) => /ERESOLVE|peer dep|unmet peer|incorrect peer|conflicting peer/i.test(line));
}

function project(name, { vitest, node }) {
  const dir = join(scratch, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }, null, 2));
  cpSync(join(example, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(example, 'test'), join(dir, 'test'), { recursive: true });
  cpSync(join(example, 'vitest.config.ts'), join(dir, 'vitest.config.ts'));
  // npm and pnpm find the Node a vitest major needs on the PATH.
  const env = { ...process.env, PATH: `${join(node.path, '..')}:${process.env.PATH}`, CI: 'true' };
  return { dir, env, vitest };
}

try {
  const tarballs = join(scratch, 'tarballs');
  mkdirSync(tarballs);
  const packed = packPublic(tarballs);
  const suite = [packed.get('@adk-state/conformance-tests'), packed.get('@adk-state/core')];
  const nodes = new Map((await nodeBinaries()).map((node) => [node.major, node]));
  const majors = MAJORS.filter((major) => only.length === 0 || only.includes(major.vitest));

  for (const major of majors) {
    const node = nodes.get(major.node);
    if (!node) throw new Error(`vitest-majors: no Node ${major.node} binary`);
    const { dir, env } = project(`vitest-${major.vitest}`, { ...major, node });
    console.log(`vitest-majors: npm install -D <suite> vitest@${major.vitest} on Node ${major.node}`);
    const installed = run(
      'npm',
      ['install', '-D', '--no-audit', '--no-fund', ...suite, `vitest@${major.vitest}`, '@google/adk@2'],
      { cwd: dir, env },
    );
    const warnings = peerWarnings(installed);
    if (warnings.length > 0) throw new Error(`vitest ${major.vitest}: npm warned about peers:\n${warnings.join('\n')}`);
    run('npm', ['ls', '--all'], { cwd: dir, env });
    const version = JSON.parse(runParts('npm', ['ls', 'vitest', '--json'], { cwd: dir, env }).stdout).dependencies
      .vitest.version;
    console.log(`vitest-majors: the example store's suite on vitest ${version}, Node ${major.node}`);
    const results = join(root, '.tmp', 'test-results', `example-custom-adapter-vitest${major.vitest}.json`);
    execFileSync(
      node.path,
      [
        join(dir, 'node_modules', 'vitest', 'vitest.mjs'),
        'run',
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${results}`,
      ],
      { cwd: dir, env, stdio: 'inherit' },
    );
  }

  if (only.length === 0 || only.includes('pnpm')) {
    const newest = MAJORS.at(-1);
    const { dir, env } = project('vitest-pnpm', { ...newest, node: nodes.get(newest.node) });
    // The suite's own dependency on core resolves to the packed core, not the registry.
    const manifest = { name: 'vitest-pnpm', private: true, type: 'module' };
    manifest.pnpm = { overrides: { '@adk-state/core': `file:${packed.get('@adk-state/core')}` } };
    writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
    console.log(`vitest-majors: pnpm add -D <suite> vitest@${newest.vitest}`);
    const installed = run('pnpm', ['add', '-D', ...suite, `vitest@${newest.vitest}`, '@google/adk@2'], {
      cwd: dir,
      env,
    });
    const warnings = peerWarnings(installed);
    if (warnings.length > 0) throw new Error(`pnpm warned about peers:\n${warnings.join('\n')}`);
  }
  console.log(
    `vitest-majors: clean install and passing suite on vitest ${majors.map((m) => m.vitest).join(', ') || '(none run)'}`,
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
