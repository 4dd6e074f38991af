// Adds up the JSON reports that every package's vitest run writes to .tmp/test-results
// and prints one closing line: "tests: N passed, N failed, N skipped".
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(new URL('..', import.meta.url).pathname, '.tmp', 'test-results');
let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of readdirSync(dir)
  .filter((name) => name.endsWith('.json'))
  .sort()) {
  const report = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  console.log(`  ${file.replace(/\.json$/, '')}: ${report.numPassedTests} passed, ${report.numFailedTests} failed`);
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (failed > 0 || passed === 0) process.exit(1);
