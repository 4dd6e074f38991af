/**
 * Small builders for end-to-end runs: agents whose system instruction is
 * exactly their own instruction text, tools that write state through
 * `ToolContext.state`, and a helper that drains one runner turn.
 */
import {
  type BaseAgent,
  type BaseSessionService,
  type Context,
  type Event,
  FunctionTool,
  LlmAgent,
  Runner,
  SequentialAgent,
} from '@google/adk';
import type { ScriptedModel } from './scripted-model.js';

/** What {@link scriptedAgent} needs. */
export interface ScriptedAgentOptions {
  name: string;
  model: ScriptedModel;
  instruction?: string;
  outputKey?: string;
  tools?: FunctionTool[];
  /** Runs before the agent; `context.state` writes become an event of their own. */
  beforeAgentCallback?: (context: Context) => undefined;
  /** Runs after the agent; `context.state` writes become an event of their own. */
  afterAgentCallback?: (context: Context) => undefined;
}

/**
 * An `LlmAgent` with transfers disabled, so ADK adds no identity or transfer
 * text and the model's system instruction is the rendered `instruction` alone.
 */
export function scriptedAgent(options: ScriptedAgentOptions): LlmAgent {
  return new LlmAgent({
    name: options.name,
    model: options.model,
    instruction: options.instruction ?? '',
    outputKey: options.outputKey,
    tools: options.tools ?? [],
    beforeAgentCallback: options.beforeAgentCallback,
    afterAgentCallback: options.afterAgentCallback,
    disallowTransferToParent: true,
    disallowTransferToPeers: true,
  });
}

/** A `SequentialAgent` running `agents` in order within one invocation. */
export function pipeline(name: string, agents: BaseAgent[]): SequentialAgent {
  return new SequentialAgent({ name, subAgents: agents });
}

/**
 * A tool without parameters whose body gets the tool context's state
 * (`context.state.set(...)` writes travel as the event's delta).
 */
export function stateTool(name: string, body: (state: Context['state']) => unknown): FunctionTool {
  return new FunctionTool({
    name,
    description: `Updates the session state (${name}).`,
    execute: (_input: unknown, context?: Context) => {
      if (!context) throw new Error(`${name} needs a tool context`);
      return body(context.state);
    },
  });
}

/** A runner for `agent` on `sessionService`. */
export function runnerFor(appName: string, agent: BaseAgent, sessionService: BaseSessionService): Runner {
  return new Runner({ appName, agent, sessionService });
}

/** Sends one user message and drains the run; returns the non-partial events the runner yielded. */
export async function turn(runner: Runner, userId: string, sessionId: string, text: string): Promise<Event[]> {
  const yielded: Event[] = [];
  for await (const event of runner.runAsync({
    userId,
    sessionId,
    newMessage: { role: 'user', parts: [{ text }] },
  })) {
    if (event.partial !== true) yielded.push(event);
  }
  return yielded;
}

/** The text of an event's parts, joined (`''` when it has none). */
export function textOf(event: Event | undefined): string {
  return (event?.content?.parts ?? []).map((part) => part.text ?? '').join('');
}

/**
 * The failures ADK reported as events instead of throwing: model errors
 * (`errorCode`) and tool errors (a function response with `error`).
 */
export function errorsOf(events: readonly Event[]): string[] {
  const errors: string[] = [];
  for (const event of events) {
    if (event.errorCode !== undefined || event.errorMessage !== undefined) {
      errors.push(`${event.author}: ${event.errorCode ?? ''} ${event.errorMessage ?? ''}`.trim());
    }
    for (const part of event.content?.parts ?? []) {
      const response = part.functionResponse?.response as { error?: unknown } | undefined;
      if (response?.error !== undefined)
        errors.push(`${event.author}: tool ${part.functionResponse?.name}: ${String(response.error)}`);
    }
  }
  return errors;
}
