/** Workload 7: heap bytes per stored event of the in-process targets, against the event's JSON size. */
import type { MemoryResult } from '../results.js';
import { summarize } from '../stats.js';
import type { OpenTarget } from '../targets/types.js';
import { heapPerEvent } from '../workloads.js';
import type { BenchContext } from './context.js';
import { interleave, message, push } from './shared.js';

/** Heap samples per in-process target. */
const HEAP_REPETITIONS = 3;

/** Fills `memory` for every target that can make a fresh service of its kind. */
export async function measureHeap(context: BenchContext): Promise<void> {
  const { memory } = context;
  const heapTargets = context.opened.filter(({ target }) => target.fresh !== undefined);
  const samples = new Map<string, number[]>();
  await interleave(heapTargets, HEAP_REPETITIONS, async ({ spec, target }, repetition) => {
    memory[spec.id] ??= {};
    const result = memory[spec.id] as MemoryResult;
    if (result.error || repetition === 0) return;
    try {
      const sample = await heapPerEvent(target.fresh as () => OpenTarget['service'], context.sizes.memoryEvents);
      result.bytesPerEvent = summarize(push(samples, spec.id, sample.bytesPerEvent));
      result.jsonBytesPerEvent = sample.jsonBytesPerEvent;
    } catch (error) {
      result.error = message(error);
    }
  });
  context.log('heap measured');
}
