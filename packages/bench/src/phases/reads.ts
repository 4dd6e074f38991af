/**
 * Workloads 3 to 5, reads: first the data, seeded once per target (through
 * its bulk seeder when it has one), then the timed reads, interleaved across
 * targets. They run before the appends, so that the append workloads' rows
 * do not sit in the tables the reads query.
 */
import { nowMs, summarize } from '../stats.js';
import { listPage, readRecent, readWhole, seedReads, timeRead, warmUp } from '../workloads.js';
import { type BenchContext, cell, READ_WORKLOADS } from './context.js';
import { collectGarbage, interleave, message } from './shared.js';

/** Fills `readData`; a target whose seeding fails gets the error in its read cells. */
export async function seedReadData(context: BenchContext): Promise<void> {
  const { log, sizes } = context;
  // Seeding is not timed, so every target seeds at once: the slowest sets the pace.
  await Promise.all(
    context.opened.map(async ({ spec, target }) => {
      const begin = nowMs();
      try {
        context.readData.set(
          spec.id,
          await seedReads(target.service, target.seed, `bench-read-${context.runId}`, sizes),
        );
        log(`seeded ${spec.label} in ${((nowMs() - begin) / 1000).toFixed(1)} s`);
      } catch (error) {
        for (const id of READ_WORKLOADS) cell(context, id, spec.id).error = `seeding failed: ${message(error)}`;
        log(`  seeding ${spec.label} failed: ${message(error)}`);
      }
    }),
  );
}

/** Times every read workload on every seeded target: milliseconds per operation. */
export async function runReads(context: BenchContext): Promise<void> {
  const { log, options, sizes } = context;
  const samples = new Map<string, number[]>();
  await interleave(context.opened, options.repetitions, async ({ spec, target }, repetition) => {
    const data = context.readData.get(spec.id);
    if (!data) return;
    const reads: Record<(typeof READ_WORKLOADS)[number], () => Promise<unknown>> = {
      'recent-small': () => readRecent(target.service, data.small, sizes.recentEvents),
      'recent-large': () => readRecent(target.service, data.large, sizes.recentEvents),
      whole: () => readWhole(target.service, data.whole, sizes.wholeHistory),
      list: () => listPage(target.service, data.listApp, sizes.listPage, sizes.listSessions),
    };
    for (const id of READ_WORKLOADS) {
      const slot = cell(context, id, spec.id);
      if (slot.error) continue;
      try {
        collectGarbage();
        await warmUp(options.warmMs, 1, reads[id]);
        const sample = await timeRead(reads[id], repetition === 0 ? options.minSampleMs / 4 : options.minSampleMs);
        if (repetition === 0) continue;
        const key = `${id}/${spec.id}`;
        const list = samples.get(key) ?? [];
        list.push(sample.msPerOperation);
        samples.set(key, list);
        slot.value = summarize(list);
      } catch (error) {
        slot.error = message(error);
        log(`  ${id} on ${spec.label} failed: ${slot.error}`);
      }
    }
  });
  log('reads done');
}
