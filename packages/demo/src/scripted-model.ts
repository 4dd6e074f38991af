/**
 * The demo's offline model: it plays a fixed script, one reply per call,
 * so the demo needs no API key and no network.
 */
import { BaseLlm, type BaseLlmConnection, type LlmRequest, type LlmResponse } from '@google/adk';

/** One reply: a tool call, or text (which may be built from the instruction the model received). */
export type Reply =
  | { tool: string; args?: Record<string, unknown> }
  | { text: string | ((instruction: string) => string) };

export class ScriptedModel extends BaseLlm {
  readonly #script: Reply[];

  constructor(script: Reply[]) {
    super({ model: 'scripted' });
    this.#script = [...script];
  }

  override async *generateContentAsync(request: LlmRequest): AsyncGenerator<LlmResponse, void> {
    const reply = this.#script.shift();
    if (!reply) throw new Error('The demo script has no reply left for this call.');
    if ('tool' in reply) {
      yield { content: { role: 'model', parts: [{ functionCall: { name: reply.tool, args: reply.args ?? {} } }] } };
      return;
    }
    const instruction = request.config?.systemInstruction;
    const text =
      typeof reply.text === 'function' ? reply.text(typeof instruction === 'string' ? instruction : '') : reply.text;
    yield { content: { role: 'model', parts: [{ text }] } };
  }

  override async connect(): Promise<BaseLlmConnection> {
    throw new Error('The scripted model has no live mode.');
  }
}
