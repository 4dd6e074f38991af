// Runs the memory store's conformance suite on every Node version of the matrix
// (this machine's Node runs it in the main test run already).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { nodeBinaries } from './smoke/node-versions.mjs';

const root = new URL('..', import.meta.url).pathname;
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
for (const node of (await nodeBinaries()).slice(1)) {
  console.log(`node-matrix: the memory store's suite on Node ${node.major}`);
  execFileSync(node.path, [vitest, 'run'], {
    cwd: join(root, 'packages', 'adapter-memory'),
    stdio: 'inherit',
    env: { ...process.env, CI: 'true' },
  });
}
console.log('node-matrix: passed on every Node version');
