// A consumer's app, run once as an ES module and once as CommonJS: an ADK Runner
// conversation through one adk-state adapter installed from its tarball.
/*IMPORTS*/

class ScriptedModel extends BaseLlm {
  constructor(replies) {
    super({ model: 'scripted-smoke-model' });
    this.replies = replies;
    this.requests = [];
  }
  async *generateContentAsync(request) {
    this.requests.push(JSON.stringify(request.config?.systemInstruction ?? ''));
    yield { content: { role: 'model', parts: [{ text: this.replies.shift() ?? 'no more replies' }] } };
  }
  async connect() {
    throw new Error('the scripted model has no live connection');
  }
}

function check(condition, message) {
  if (!condition) throw new Error(`smoke check failed: ${message}`);
}

async function main() {
  const service = await makeService(adapter);
  const appName = `smoke-${process.pid}-${Date.now()}`;
  const model = new ScriptedModel(['first reply', 'second reply']);
  const agent = new LlmAgent({
    name: 'smoke_agent',
    model,
    instruction: 'Previous answer: {user:last?}. Turn: {turn?}.',
    outputKey: 'user:last',
  });
  const runner = new Runner({ appName, agent, sessionService: service });
  const session = await service.createSession({ appName, userId: 'u1', state: { turn: 1 } });
  for (const text of ['hello', 'again']) {
    for await (const _event of runner.runAsync({
      userId: 'u1',
      sessionId: session.id,
      newMessage: { role: 'user', parts: [{ text }] },
    })) {
      // drain
    }
  }
  const stored = await service.getSession({ appName, userId: 'u1', sessionId: session.id });
  check(stored && stored.state['user:last'] === 'second reply', `user:last is ${JSON.stringify(stored?.state)}`);
  check(stored.events.length === 4, `4 events stored, got ${stored.events.length}`);
  check(model.requests[1].includes('Previous answer: first reply. Turn: 1.'), `instruction was ${model.requests[1]}`);
  const other = await service.createSession({ appName, userId: 'u1' });
  check(other.state['user:last'] === 'second reply', 'a second session of the user sees user: state');
  await service.close?.();
  console.log(`smoke ok: ${process.env.SMOKE_LABEL} (node ${process.version})`);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
