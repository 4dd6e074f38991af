/** The raw round-trip rate of every backend that has probes, one at a time and many at once. */
import type { Probe } from '../backends/types.js';
import type { BackendInfo } from '../results.js';
import { summarize } from '../stats.js';
import { probeConcurrent, probeSequential } from '../workloads.js';
import type { BenchContext } from './context.js';
import { collectGarbage, interleave, push } from './shared.js';

/** Fills `backendInfos`: the probes of every started backend, interleaved across backends. */
export async function measureProbes(context: BenchContext): Promise<void> {
  const { options } = context;
  const infos: BackendInfo[] = [];
  const probes: Array<{ info: BackendInfo; probe: Probe }> = [];
  for (const entry of context.backends.values()) {
    if (!entry.running) continue;
    const info: BackendInfo = {
      id: entry.spec.id,
      label: entry.spec.label,
      details: entry.running.details,
      probes: [],
    };
    infos.push(info);
    for (const probe of entry.running.probes) probes.push({ info, probe });
  }
  const sequential = new Map<string, number[]>();
  const concurrent = new Map<string, number[]>();
  const ops = options.sizes.rawOps;
  await interleave(probes, options.repetitions, async ({ info, probe }, repetition) => {
    const count = repetition === 0 ? Math.max(10, Math.floor(ops / 10)) : ops;
    collectGarbage();
    const one = await probeSequential(probe, count, options.probeMaxMs, options.warmMs);
    const many = await probeConcurrent(probe, count, options.rawConcurrency, options.probeMaxMs, options.warmMs);
    if (repetition === 0) return;
    const key = `${info.id}/${probe.name}`;
    const result = {
      name: probe.name,
      sequential: summarize(push(sequential, key, one)),
      concurrent: summarize(push(concurrent, key, many)),
    };
    const index = info.probes.findIndex((each) => each.name === probe.name);
    if (index >= 0) info.probes[index] = result;
    else info.probes.push(result);
  });
  if (probes.length > 0) context.log('raw round trips measured');
  context.backendInfos = infos;
}
