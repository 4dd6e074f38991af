/**
 * A model for end-to-end runs of the ADK runtime without a network: it
 * answers from a queue of scripted replies and records every request it
 * receives, so a test can assert the exact instruction the agent sent.
 */
import { BaseLlm, type BaseLlmConnection, type LlmRequest, type LlmResponse } from '@google/adk';

/** One scripted answer: plain text, or a call of one tool. */
export type ScriptedReply = { text: string } | { call: string; args?: Record<string, unknown> };

/** A reply, or a function that picks the reply from the request it answers. */
export type ScriptedStep = ScriptedReply | ((request: RecordedRequest) => ScriptedReply);

/** What the model saw in one call, copied when the call was made. */
export interface RecordedRequest {
  /** The system instruction, exactly as the agent built it (`''` when none). */
  instruction: string;
  /** The conversation contents sent with the call, as plain JSON. */
  contents: unknown[];
  /** The names of the tools the agent offered. */
  tools: string[];
}

/** A text reply. */
export function say(text: string): ScriptedReply {
  return { text };
}

/** A reply that calls the tool `name` with `args`. */
export function callTool(name: string, args: Record<string, unknown> = {}): ScriptedReply {
  return { call: name, args };
}

/** A `BaseLlm` that replays scripted replies, in order, and records its requests. */
export class ScriptedModel extends BaseLlm {
  readonly requests: RecordedRequest[] = [];
  readonly #steps: ScriptedStep[];
  /** Calls made after the script ran out (each one fails). */
  #overruns = 0;

  constructor(steps: readonly ScriptedStep[] = [], name = 'scripted-model') {
    super({ model: name });
    this.#steps = [...steps];
  }

  /** Appends more replies to the end of the script. */
  push(...steps: ScriptedStep[]): this {
    this.#steps.push(...steps);
    return this;
  }

  /** How many scripted replies have not been used yet. */
  get remaining(): number {
    return this.#steps.length;
  }

  /** The instruction of every recorded call, in order. */
  get instructions(): string[] {
    return this.requests.map((request) => request.instruction);
  }

  /** Throws unless every scripted reply was used and no call went past the script. */
  assertDrained(): void {
    if (this.#steps.length > 0 || this.#overruns > 0) {
      throw new Error(
        `${this.model}: ${this.#steps.length} scripted replies were not used and ${this.#overruns} calls came after the script ended`,
      );
    }
  }

  override async *generateContentAsync(llmRequest: LlmRequest): AsyncGenerator<LlmResponse, void> {
    const recorded = record(llmRequest);
    this.requests.push(recorded);
    const step = this.#steps.shift();
    if (step === undefined) {
      this.#overruns++;
      throw new Error(`${this.model}: no scripted reply left for call ${this.requests.length}`);
    }
    const reply = typeof step === 'function' ? step(recorded) : step;
    yield toResponse(reply);
  }

  override async connect(_llmRequest: LlmRequest): Promise<BaseLlmConnection> {
    throw new Error(`${this.model} answers from a script and has no live connection`);
  }
}

function toResponse(reply: ScriptedReply): LlmResponse {
  if ('call' in reply) {
    return {
      content: { role: 'model', parts: [{ functionCall: { name: reply.call, args: reply.args ?? {} } }] },
      turnComplete: true,
    };
  }
  return { content: { role: 'model', parts: [{ text: reply.text }] }, turnComplete: true };
}

function record(request: LlmRequest): RecordedRequest {
  const system = request.config?.systemInstruction;
  const instruction = system === undefined ? '' : typeof system === 'string' ? system : JSON.stringify(system);
  const contents = JSON.parse(JSON.stringify(request.contents ?? [])) as unknown[];
  return { instruction, contents, tools: Object.keys(request.toolsDict ?? {}) };
}
