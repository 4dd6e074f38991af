/** Workload 8: the scale-out workload of every target that has a cluster (run once: it counts, it does not time). */
import type { BenchContext } from './context.js';

/** Fills `clusters` for every opened target with a cluster. */
export async function runClusters(context: BenchContext): Promise<void> {
  const { log, clusters } = context;
  for (const { spec, target } of context.opened) {
    if (!target.cluster) continue;
    log(`${spec.label} on a cluster: ${context.sizes.clusterUsers} users of one app`);
    clusters[spec.id] = await target.cluster(context.sizes);
    const error = clusters[spec.id]?.error;
    if (error) log(`  ${spec.label} on a cluster failed: ${error}`);
  }
}
