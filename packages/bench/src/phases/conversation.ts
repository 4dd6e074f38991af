/**
 * Workload 9: the conversation through ADK's Runner on every target, one
 * target after another (a conversation is one long sample), with the store
 * time per turn at turns 10, 100 and 1,000 and Firestore's documents read.
 */
import type { BaseSessionService } from '@google/adk';
import { type ConversationResult, runConversation } from '../conversation.js';
import { warmUp } from '../workloads.js';
import type { BenchContext } from './context.js';
import { collectGarbage, message } from './shared.js';

/** Turns of each untimed conversation before the timed one. */
const WARM_TURNS = 10;

/** The turns whose figures are kept. */
export const CONVERSATION_CHECKPOINTS = [10, 100, 1_000] as const;

/**
 * Fills `conversation` for every opened target, and `conversationShared`
 * for those with a service whose whole reads share the cached events.
 */
export async function runConversations(context: BenchContext): Promise<void> {
  for (const { spec, target } of context.opened) {
    const runs: [BaseSessionService, Record<string, ConversationResult>, string][] = [
      [target.service, context.conversation, ''],
    ];
    if (target.sharingReads) runs.push([target.sharingReads, context.conversationShared, ' (shareReadEvents)']);
    for (const [service, into, variant] of runs) {
      into[spec.id] = await converse(context, service, `${spec.id}${variant ? '-shared' : ''}`, target.documentsRead);
      const result = into[spec.id] as ConversationResult;
      const figures = result.points.map((point) => `turn ${point.turn}: ${point.storeMs.median.toFixed(2)} ms`);
      context.log(
        result.error
          ? `  conversation on ${spec.label}${variant} failed: ${result.error}`
          : `  conversation on ${spec.label}${variant}: ${figures.join(', ')}`,
      );
    }
  }
  context.log('conversations run');
}

/** One conversation of the run's length on `service`, in an app of its own; a failure is kept as the result's error. */
async function converse(
  context: BenchContext,
  service: BaseSessionService,
  name: string,
  documents: (() => number) | undefined,
): Promise<ConversationResult> {
  const turns = context.sizes.conversationTurns;
  collectGarbage();
  try {
    const appName = `bench-conversation-${context.runId}-${name}`;
    // Untimed conversations of their own first (README, "Warm-up"), so that turn 10 is not timed
    // while the code the forced collection deoptimized is being optimized again.
    await warmUp(context.options.warmMs, 1, (_, round) =>
      runConversation(service, `${appName}-warm-${round}`, WARM_TURNS, []),
    );
    return await runConversation(service, appName, turns, CONVERSATION_CHECKPOINTS, documents);
  } catch (error) {
    return { turns, points: [], error: message(error) };
  }
}
