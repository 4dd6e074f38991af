/**
 * The first and the last phase: start the backends the selected targets
 * need and open the targets on them (a target whose backend or package
 * cannot be used is reported as skipped), place the bench and its servers on
 * separate cores, and at the end close every target and stop every backend.
 */
import { separateCores } from '../affinity.js';
import type { TargetInfo } from '../results.js';
import type { AnyTargetSpec } from '../targets/types.js';
import type { BenchContext } from './context.js';
import { message } from './shared.js';

/** The targets named by `--only`, in the registry's order; all of them without it. */
export function selectTargets(targets: readonly AnyTargetSpec[], only: string[] | undefined): AnyTargetSpec[] {
  if (!only) return [...targets];
  const unknown = only.filter((id) => !targets.some((target) => target.id === id));
  if (unknown.length > 0) {
    throw new Error(`unknown target ${unknown.join(', ')}; known: ${targets.map((target) => target.id).join(', ')}`);
  }
  return targets.filter((target) => only.includes(target.id));
}

/** Starts each backend once, when its first target comes, and opens every target on its backend. */
export async function openTargets(context: BenchContext, selected: readonly AnyTargetSpec[]): Promise<void> {
  const { backends, log } = context;
  for (const spec of selected) {
    const info: TargetInfo = {
      id: spec.id,
      label: spec.label,
      kind: spec.kind,
      backend: spec.backend.id,
      status: 'ok',
    };
    context.targets.push(info);
    let entry = backends.get(spec.backend.id);
    if (!entry) {
      entry = { spec: spec.backend };
      backends.set(spec.backend.id, entry);
      try {
        log(`starting ${spec.backend.label}`);
        entry.running = await spec.backend.start();
      } catch (error) {
        entry.error = message(error);
        log(`  ${spec.backend.label} could not be started: ${entry.error}`);
      }
    }
    if (!entry.running) {
      info.status = 'skipped';
      info.reason = `${spec.backend.label} could not be started: ${entry.error}`;
      continue;
    }
    try {
      const target = await spec.open(entry.running);
      context.opened.push({ spec, target });
      if (target.details) info.details = target.details;
    } catch (error) {
      info.status = 'skipped';
      info.reason = `could not be opened: ${message(error)}`;
      log(`  ${spec.label} skipped: ${info.reason}`);
    }
  }
}

/** With `--pin` (the default): the bench on the first core, every server it started on the others. */
export async function placeProcesses(context: BenchContext): Promise<void> {
  const detached = [...context.backends.values()].flatMap((entry) => entry.running?.detachedPids?.() ?? []);
  if (!context.options.pin) return;
  context.placement = await separateCores(context.log, detached);
}

/** Closes every opened target, then stops every started backend; a failure is logged, not thrown. */
export async function closeTargets(context: BenchContext): Promise<void> {
  const { log } = context;
  for (const { spec, target } of context.opened) {
    await target.close().catch((error) => log(`  closing ${spec.label}: ${message(error)}`));
  }
  for (const entry of context.backends.values()) {
    await entry.running?.stop().catch((error) => log(`  stopping ${entry.spec.label}: ${message(error)}`));
  }
}
