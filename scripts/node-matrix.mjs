// The Node version matrix: the memory store's conformance suite on every Node version
// (this machine's Node runs it in the main test run already), and the Firestore adapter's
// tests with the highest client it claims, @google-cloud/firestore 9.x, which needs Node 22
// or later, on the lowest such Node of the matrix. Results join .tmp/test-results.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { nodeBinaries } from './smoke/node-versions.mjs';

const root = new URL('..', import.meta.url).pathname;
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');

function runSuite(node, folder, label, env = {}) {
  const results = join(root, '.tmp', 'test-results', `${label}.json`);
  execFileSync(node.path, [vitest, 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${results}`], {
    cwd: join(root, 'packages', folder),
    stdio: 'inherit',
    env: { ...process.env, CI: 'true', ...env },
  });
}

const [, ...others] = await nodeBinaries();
for (const node of others) {
  console.log(`node-matrix: the memory store's suite on Node ${node.major}`);
  runSuite(node, 'adapter-memory', `adapter-memory-node${node.major}`);
}
const firestoreNode = others.find((node) => Number(node.major) >= 22);
if (!firestoreNode) throw new Error('node-matrix: no Node 22 or later to run @google-cloud/firestore 9.x on');
console.log(
  `node-matrix: the Firestore adapter's tests with @google-cloud/firestore 9.x on Node ${firestoreNode.major}`,
);
runSuite(firestoreNode, 'adapter-firestore', `adapter-firestore-client-v9-node${firestoreNode.major}`, {
  ADK_STATE_FIRESTORE_CLIENT: 'v9',
});
console.log('node-matrix: passed on every Node version');
