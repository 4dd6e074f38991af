/**
 * Workloads 1 and 2, appends: one session after the other, then many
 * sessions at once through one service, interleaved across targets, each
 * repetition in an app of its own.
 */
import { summarize } from '../stats.js';
import { appendConcurrent, appendSequential } from '../workloads.js';
import { APPEND_WORKLOADS, type BenchContext, cell } from './context.js';
import { collectGarbage, interleave, message, push } from './shared.js';

/** Events per second of both append workloads on every target, and of sequential appends the drift and CPU time. */
export async function runAppends(context: BenchContext): Promise<void> {
  for (const id of APPEND_WORKLOADS) {
    await runAppendWorkload(context, id);
    context.log(`${id} done`);
  }
}

async function runAppendWorkload(context: BenchContext, id: (typeof APPEND_WORKLOADS)[number]): Promise<void> {
  const { log, options, sizes, runId } = context;
  const rates = new Map<string, number[]>();
  const counts = new Map<string, number[]>();
  const firsts = new Map<string, number[]>();
  const lasts = new Map<string, number[]>();
  const cpus = new Map<string, number[]>();
  await interleave(context.opened, options.repetitions, async ({ spec, target }, repetition) => {
    const slot = cell(context, id, spec.id);
    if (slot.error) return;
    const warmUp = repetition === 0;
    const params = {
      appName: `bench-${id}-${repetition}-${runId}`,
      events: warmUp ? Math.max(50, Math.floor(sizes.appendEvents / 10)) : sizes.appendEvents,
      maxMs: warmUp ? options.maxSampleMs / 4 : options.maxSampleMs,
      warmMs: options.warmMs,
    };
    try {
      collectGarbage();
      const sample =
        id === 'append-sequential'
          ? await appendSequential(target.service, params)
          : await appendConcurrent(target.service, { ...params, sessions: sizes.concurrentSessions });
      if (warmUp) return;
      slot.value = summarize(push(rates, spec.id, sample.eventsPerSecond));
      slot.events = summarize(push(counts, spec.id, sample.events));
      if (sample.firstTenthPerSecond !== undefined && sample.lastTenthPerSecond !== undefined) {
        slot.firstTenth = summarize(push(firsts, spec.id, sample.firstTenthPerSecond));
        slot.lastTenth = summarize(push(lasts, spec.id, sample.lastTenthPerSecond));
      }
      if (sample.cpuMicrosPerEvent !== undefined) {
        slot.cpuPerEvent = summarize(push(cpus, spec.id, sample.cpuMicrosPerEvent));
      }
    } catch (error) {
      slot.error = message(error);
      log(`  ${id} on ${spec.label} failed: ${slot.error}`);
    }
  });
}
