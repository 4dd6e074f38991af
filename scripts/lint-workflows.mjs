// Lints every GitHub Actions workflow with action-validator (the workflow schema and
// its glob and path rules), and fails on the first file it rejects.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const dir = join(root, '.github', 'workflows');
const files = readdirSync(dir).filter((name) => /\.ya?ml$/.test(name));
if (files.length === 0) throw new Error('lint-workflows: no workflow files found');
for (const file of files.sort()) {
  execFileSync(join(root, 'node_modules', '.bin', 'action-validator'), [join(dir, file)], { stdio: 'inherit' });
  console.log(`lint-workflows: ${file} is valid`);
}
