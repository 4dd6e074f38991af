/**
 * `pnpm bench`: runs every workload on every target, prints the table, and
 * writes results.json, results.md and chart.svg (docs/bench by default).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseOptions, USAGE } from './options.js';
import { renderChart } from './report/chart.js';
import { renderMarkdown } from './report/markdown.js';
import { renderTable } from './report/table.js';
import { runBench } from './run.js';
import { garbageCollector } from './workloads.js';

const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

async function main(): Promise<void> {
  // Ctrl-C or a kill still runs the exit hooks that stop the servers the bench started.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  const options = parseOptions(process.argv.slice(2), join(repositoryRoot, 'docs', 'bench'));
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (!garbageCollector()) {
    process.stderr.write('note: node runs without --expose-gc; the heap workload (7) will be reported as failed\n');
  }
  const results = await runBench(options);
  process.stdout.write(`${renderTable(results)}\n`);
  if (options.outDir) {
    const outDir = resolve(options.outDir);
    await mkdir(outDir, { recursive: true });
    const chartPath = join(outDir, 'chart.svg');
    await writeFile(join(outDir, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
    await writeFile(chartPath, renderChart(results));
    // A root-relative link: it works in docs/bench/results.md and pasted into the root README alike.
    await writeFile(join(outDir, 'results.md'), renderMarkdown(results, '/docs/bench/chart.svg'));
    process.stdout.write(`\nwrote ${relative(process.cwd(), outDir) || '.'}/{results.json,results.md,chart.svg}\n`);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
