/**
 * Workload 9: the conversation through ADK's Runner on every target, one
 * target after another (a conversation is one long sample), with the store
 * time per turn at turns 10, 100 and 1,000 and Firestore's documents read.
 */
import { runConversation } from '../conversation.js';
import type { BenchContext } from './context.js';
import { collectGarbage, message } from './shared.js';

/** The turns whose figures are kept. */
export const CONVERSATION_CHECKPOINTS = [10, 100, 1_000] as const;

/** Fills `conversation` for every opened target. */
export async function runConversations(context: BenchContext): Promise<void> {
  const turns = context.sizes.conversationTurns;
  for (const { spec, target } of context.opened) {
    const appName = `bench-conversation-${context.runId}-${spec.id}`;
    collectGarbage();
    try {
      context.conversation[spec.id] = await runConversation(
        target.service,
        appName,
        turns,
        CONVERSATION_CHECKPOINTS,
        target.documentsRead,
      );
      const points = context.conversation[spec.id]?.points ?? [];
      const figures = points.map((point) => `turn ${point.turn}: ${point.storeMs.median.toFixed(2)} ms`).join(', ');
      context.log(`  conversation on ${spec.label}: ${figures}`);
    } catch (error) {
      context.conversation[spec.id] = { turns, points: [], error: message(error) };
      context.log(`  conversation on ${spec.label} failed: ${message(error)}`);
    }
  }
  context.log('conversations run');
}
