/** Workload 11: client CPU per operation of every target that measures it, beside the same round trips sent raw. */
import type { BenchContext } from './context.js';
import { message } from './shared.js';

/** Fills `clientCpu` for every opened target that measures it. */
export async function measureClientCpu(context: BenchContext): Promise<void> {
  for (const { spec, target } of context.opened) {
    if (!target.clientCpu) continue;
    try {
      context.clientCpu[spec.id] = await target.clientCpu({
        runId: context.runId,
        repetitions: context.options.repetitions,
        minSampleMs: context.options.minSampleMs,
      });
    } catch (error) {
      context.clientCpu[spec.id] = { rows: [], events: 0, sessions: 0, error: message(error) };
      context.log(`  client CPU per operation on ${spec.label} failed: ${message(error)}`);
    }
  }
  if (Object.keys(context.clientCpu).length > 0) context.log('client CPU per operation measured');
}
