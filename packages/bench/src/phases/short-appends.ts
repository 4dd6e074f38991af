/**
 * Workload 10: appendEvent on sessions that hold 10 events, on the in-process
 * targets (the memory store and ADK's InMemorySessionService): each sample
 * fills many sessions with 10 events, untimed, then (after the forced
 * collection and the warm-up) times one more append on each. Interleaved, as
 * the other workloads.
 */
import type { BaseSessionService, Session } from '@google/adk';
import { benchEvent, benchEvents } from '../events.js';
import { summarize } from '../stats.js';
import { warmUp } from '../workloads.js';
import type { BenchContext } from './context.js';
import { collectGarbage, interleave, message, push } from './shared.js';

/** Sessions per sample (`--quick`: 1,000): enough appends that a collection pause is a small share of a sample. */
const SESSIONS = 5_000;
const QUICK_SESSIONS = 1_000;
/** Events each session holds when its timed append comes. */
const HELD = 10;

/** Sessions of 10 events that the warm-up after the forced collection appends to, a fifth of the timed ones. */
const WARM_SHARE = 5;

async function filled(service: BaseSessionService, appName: string, count: number, users: string): Promise<Session[]> {
  const sessions: Session[] = [];
  for (let index = 0; index < count; index++) {
    const session = await service.createSession({ appName, userId: `${users}-${index % 10}` });
    for (const event of benchEvents(HELD, `${appName}-${users}-${index}`))
      await service.appendEvent({ session, event });
    sessions.push(session);
  }
  return sessions;
}

async function sample(service: BaseSessionService, appName: string, count: number, warmMs: number): Promise<number> {
  const sessions = await filled(service, appName, count, 'user');
  const warm = await filled(service, appName, Math.ceil(count / WARM_SHARE), 'warm');
  const events = sessions.map((_, index) => benchEvent(HELD, `${appName}-user-${index}`));
  collectGarbage();
  // Round after round over the warm sessions (each one more event per round).
  await warmUp(warmMs, 1, (_, step) =>
    service.appendEvent({
      session: warm[step % warm.length] as Session,
      event: benchEvent(HELD + Math.floor(step / warm.length), `${appName}-warm-${step % warm.length}`),
    }),
  );
  const started = performance.now();
  for (const [index, session] of sessions.entries()) {
    await service.appendEvent({ session, event: events[index] as (typeof events)[number] });
  }
  return (count / (performance.now() - started)) * 1000;
}

/** Fills `shortAppends` (appends per second) for every in-process target. */
export async function runShortAppends(context: BenchContext): Promise<void> {
  const targets = context.opened.filter(({ target }) => target.fresh !== undefined);
  const samples = new Map<string, number[]>();
  await interleave(targets, context.options.repetitions, async ({ spec, target }, repetition) => {
    if (context.shortAppendErrors[spec.id]) return;
    try {
      const service = (target.fresh as () => BaseSessionService)();
      const count = context.options.quick ? QUICK_SESSIONS : SESSIONS;
      const rate = await sample(
        service,
        `bench-short-${context.runId}-${spec.id}-${repetition}`,
        count,
        context.options.warmMs,
      );
      if (repetition > 0) context.shortAppends[spec.id] = summarize(push(samples, spec.id, rate));
    } catch (error) {
      context.shortAppendErrors[spec.id] = message(error);
      context.log(`  appends on 10-event sessions failed on ${spec.label}: ${message(error)}`);
    }
  });
  context.log('appends on 10-event sessions done');
}
