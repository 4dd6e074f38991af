/**
 * The demo's agent: a book-club concierge whose tools write state in every
 * scope and whose instruction reads it back through `{key}` templates.
 */
import { type BaseLlm, type Context, FunctionTool, LlmAgent } from '@google/adk';
import { z } from 'zod';

/** The last line of the instruction: ADK fills each `{key}` from the session state before every model call. */
export const STATE_LINE =
  'Reader: [{user:name?}] Likes: [{user:genre?}] Featured: [{app:featured}] Visits: [{visits?}] Note: [{temp:note?}]';

/** The whole instruction: what to do, then the state line. */
export const INSTRUCTION = [
  'You are the concierge of a book club and answer in one or two short sentences.',
  'At the start of every turn call log_visit once. When the reader tells you their name or',
  'favourite genre, call remember_reader. Recommend the featured book when asked.',
  STATE_LINE,
].join('\n');

/** What the demo observes while a turn runs. */
export interface TurnProbe {
  /** The system instruction of every model call, as the model received it. */
  instructions: string[];
  /** The invocation's own view of the state when the agent finished (includes `temp:` keys). */
  stateAtEnd: Record<string, unknown>;
}

/** Counts the visit: session `visits`, app-wide `app:visits`, and a `temp:` note for this invocation only. */
const logVisit = new FunctionTool({
  name: 'log_visit',
  description: 'Records that the reader visited. Call it once at the start of every turn.',
  execute: (_input: unknown, context?: Context) => {
    const state = requireState(context);
    const visits = Number(state.get('visits', 0)) + 1;
    state.set('visits', visits);
    state.set('app:visits', Number(state.get('app:visits', 0)) + 1);
    state.set('temp:note', `visit ${visits} logged`);
    return { visits };
  },
});

/** Remembers the reader's name and favourite genre for every session of this user. */
const rememberReader = new FunctionTool({
  name: 'remember_reader',
  description: "Saves the reader's name and favourite genre when the reader tells them.",
  parameters: z.object({
    name: z.string().optional().describe("The reader's first name."),
    genre: z.string().optional().describe("The reader's favourite genre."),
  }),
  execute: ({ name, genre }, context?: Context) => {
    const state = requireState(context);
    if (name) state.set('user:name', name);
    if (genre) state.set('user:genre', genre);
    return { saved: [name && 'name', genre && 'genre'].filter(Boolean) };
  },
});

function requireState(context: Context | undefined): Context['state'] {
  if (!context) throw new Error('This tool needs a tool context.');
  return context.state;
}

/** A fresh concierge on `model`; `probe` is filled in while a turn runs. */
export function concierge(model: BaseLlm, probe: TurnProbe): LlmAgent {
  return new LlmAgent({
    name: 'concierge',
    description: 'Helps readers of the book club pick their next book.',
    model,
    instruction: INSTRUCTION,
    tools: [logVisit, rememberReader],
    outputKey: 'last_reply',
    disallowTransferToParent: true,
    disallowTransferToPeers: true,
    beforeModelCallback: ({ request }) => {
      const instruction = request.config?.systemInstruction;
      probe.instructions.push(typeof instruction === 'string' ? instruction : JSON.stringify(instruction ?? ''));
      return undefined;
    },
    afterAgentCallback: (context) => {
      probe.stateAtEnd = { ...context.state.toRecord() };
      return undefined;
    },
  });
}
