/**
 * The ADK runtime end to end: the real `@google/adk` Runner, agents, tools
 * and instruction templates, on the store under test, with a scripted model.
 */
import { type Event, ParallelAgent, type Session } from '@google/adk';
import { expect } from 'vitest';
import { type Group, ids, plain, put } from '../kit.js';
import { errorsOf, pipeline, runnerFor, scriptedAgent, stateTool, textOf, turn } from '../runtime/agents.js';
import { callTool, ScriptedModel, say } from '../runtime/scripted-model.js';

/** Every state-delta key of every stored event of a session. */
function storedDeltaKeys(session: Session | undefined): string[] {
  return (session?.events ?? []).flatMap((event) => Object.keys(event.actions?.stateDelta ?? {}));
}

/** What each scope of `outputKey` must leave behind, for a reply saved in alice's session `s1`. */
const OUTPUT_KEY_SCOPES: ReadonlyArray<{
  outputKey: string;
  title: string;
  /** The state of alice/s1, alice's other sessions, and bob's session. */
  own: Record<string, unknown>;
  sameUser: Record<string, unknown>;
  otherUser: Record<string, unknown>;
  userBucket: Record<string, unknown>;
  appBucket: Record<string, unknown>;
  delta: Record<string, unknown>;
}> = [
  {
    outputKey: 'answer',
    title: 'outputKey without a prefix saves the reply in that session only',
    own: { answer: 'forty-two' },
    sameUser: {},
    otherUser: {},
    userBucket: {},
    appBucket: {},
    delta: { answer: 'forty-two' },
  },
  {
    outputKey: 'user:answer',
    title: "outputKey 'user:' saves the reply for every session of that user, and no other user",
    own: { 'user:answer': 'forty-two' },
    sameUser: { 'user:answer': 'forty-two' },
    otherUser: {},
    userBucket: { answer: 'forty-two' },
    appBucket: {},
    delta: { 'user:answer': 'forty-two' },
  },
  {
    outputKey: 'app:answer',
    title: "outputKey 'app:' saves the reply for every session of every user of the app",
    own: { 'app:answer': 'forty-two' },
    sameUser: { 'app:answer': 'forty-two' },
    otherUser: { 'app:answer': 'forty-two' },
    userBucket: {},
    appBucket: { answer: 'forty-two' },
    delta: { 'app:answer': 'forty-two' },
  },
  {
    outputKey: 'temp:answer',
    title: "outputKey 'temp:' is never stored: not in any state, bucket or stored event",
    own: {},
    sameUser: {},
    otherUser: {},
    userBucket: {},
    appBucket: {},
    delta: {},
  },
];

export const runtime: Group = {
  title: 'the ADK runtime end to end',
  define({ test }) {
    for (const scope of OUTPUT_KEY_SCOPES) {
      test(scope.title, async (kit) => {
        const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
        const sibling = await service.createSession({ appName, userId: 'alice', sessionId: 's2' });
        const bobs = await service.createSession({ appName, userId: 'bob', sessionId: 's1' });
        const model = new ScriptedModel([say('forty-two')]);
        const agent = scriptedAgent({ name: 'answerer', model, instruction: 'Answer.', outputKey: scope.outputKey });
        const yielded = await turn(runnerFor(appName, agent, service), 'alice', 's1', 'What is the answer?');
        model.assertDrained();
        expect(errorsOf(yielded)).toEqual([]);
        expect(yielded).toHaveLength(1);
        expect(textOf(yielded[0])).toBe('forty-two');
        expect(plain(yielded[0]?.actions.stateDelta)).toEqual(scope.delta);

        const stored = await kit.reload(session);
        expect(plain(stored.state)).toEqual(scope.own);
        // The first stored event is the user's message, which the Runner stores but does not yield.
        expect(ids(stored).slice(1)).toEqual(yielded.map((event) => event.id));
        expect(plain(stored.events[1]?.actions.stateDelta)).toEqual(scope.delta);
        expect(storedDeltaKeys(stored).filter((key) => key.startsWith('temp:'))).toEqual([]);

        expect(plain((await kit.reload(sibling)).state)).toEqual(scope.sameUser);
        const later = await service.createSession({ appName, userId: 'alice', sessionId: 's3' });
        expect(plain(later.state)).toEqual(scope.sameUser);
        expect(plain((await kit.reload(bobs)).state)).toEqual(scope.otherUser);
        expect(await service.getUserState({ appName, userId: 'alice' })).toEqual(scope.userBucket);
        expect(await service.getUserState({ appName, userId: 'bob' })).toEqual({});
        expect(await service.getAppState({ appName })).toEqual(scope.appBucket);
      });
    }

    test('ToolContext.state writes travel as the event delta and land in their buckets; temp: only lives in the invocation', async (kit) => {
      const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
      const sibling = await service.createSession({ appName, userId: 'alice', sessionId: 's2' });
      const bobs = await service.createSession({ appName, userId: 'bob', sessionId: 's1' });
      const remember = stateTool('remember', (state) => {
        state.set('note', 'n');
        state.set('user:note', 'u');
        state.set('app:note', 'a');
        state.set('temp:note', 't');
        return { saved: true };
      });
      const model = new ScriptedModel([callTool('remember'), say('noted')]);
      const agent = scriptedAgent({ name: 'keeper', model, instruction: 'Scratch: [{temp:note?}]', tools: [remember] });
      const yielded = await turn(runnerFor(appName, agent, service), 'alice', 's1', 'Remember this.');
      model.assertDrained();
      expect(errorsOf(yielded)).toEqual([]);

      // The function call, the function response carrying the writes, the final text.
      expect(yielded).toHaveLength(3);
      expect(yielded[0]?.content?.parts?.[0]?.functionCall?.name).toBe('remember');
      expect(yielded[1]?.content?.parts?.[0]?.functionResponse?.response).toEqual({ saved: true });
      expect(plain(yielded[1]?.actions.stateDelta)).toEqual({ note: 'n', 'user:note': 'u', 'app:note': 'a' });
      expect(textOf(yielded[2])).toBe('noted');
      // The temp: value is readable by the model call that follows the tool, in the same invocation.
      expect(model.instructions).toEqual(['Scratch: []', 'Scratch: [t]']);

      const stored = await kit.reload(session);
      expect(plain(stored.state)).toEqual({ note: 'n', 'user:note': 'u', 'app:note': 'a' });
      expect(ids(stored).slice(1)).toEqual(yielded.map((event) => event.id));
      expect(plain(stored.events[2]?.actions.stateDelta)).toEqual({ note: 'n', 'user:note': 'u', 'app:note': 'a' });
      expect(storedDeltaKeys(stored).filter((key) => key.startsWith('temp:'))).toEqual([]);
      expect(await service.getUserState({ appName, userId: 'alice' })).toEqual({ note: 'u' });
      expect(await service.getUserState({ appName, userId: 'bob' })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({ note: 'a' });
      expect(plain((await kit.reload(sibling)).state)).toEqual({ 'user:note': 'u', 'app:note': 'a' });
      expect(plain((await kit.reload(bobs)).state)).toEqual({ 'app:note': 'a' });
    });

    test('CallbackContext.state writes in agent callbacks travel as event deltas and land in their buckets', async (kit) => {
      const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
      const model = new ScriptedModel([say('hi')]);
      const agent = scriptedAgent({
        name: 'host',
        model,
        instruction: 'Started [{temp:started?}]; visits {user:visits}',
        beforeAgentCallback: (context) => {
          context.state.set('greeted', true);
          context.state.set('user:visits', 1);
          context.state.set('temp:started', 'yes');
          return undefined;
        },
        afterAgentCallback: (context) => {
          context.state.set('app:last_agent', 'host');
          return undefined;
        },
      });
      const yielded = await turn(runnerFor(appName, agent, service), 'alice', 's1', 'Hello.');
      model.assertDrained();
      expect(errorsOf(yielded)).toEqual([]);
      expect(yielded.map((event) => plain(event.actions.stateDelta))).toEqual([
        { greeted: true, 'user:visits': 1 },
        {},
        { 'app:last_agent': 'host' },
      ]);
      expect(textOf(yielded[1])).toBe('hi');
      expect(model.instructions).toEqual(['Started [yes]; visits 1']);

      const stored = await kit.reload(session);
      expect(ids(stored).slice(1)).toEqual(yielded.map((event) => event.id));
      expect(stored.events.map((event) => plain(event.actions.stateDelta))).toEqual([
        {},
        { greeted: true, 'user:visits': 1 },
        {},
        { 'app:last_agent': 'host' },
      ]);
      expect(plain(stored.state)).toEqual({ greeted: true, 'user:visits': 1, 'app:last_agent': 'host' });
      expect(await service.getUserState({ appName, userId: 'alice' })).toEqual({ visits: 1 });
      expect(await service.getAppState({ appName })).toEqual({ last_agent: 'host' });
    });

    test('instruction templates {key}, {user:key}, {app:key} and {key?} render the state the store returned', async (kit) => {
      // user: and app: values written through other sessions, session values at creation.
      const { service, session: bobs, appName } = await kit.fresh({ userId: 'bob', sessionId: 'b1' });
      await put(service, bobs, { 'app:tone': 'calm' });
      const other = await service.createSession({ appName, userId: 'alice', sessionId: 'a0' });
      await put(service, other, { 'user:name': 'Ada', 'user:prefs': { lang: 'fr', n: 2 } });
      await service.createSession({
        appName,
        userId: 'alice',
        sessionId: 'a1',
        state: { topic: 'tides', count: 3, flag: false, nothing: null },
      });
      const model = new ScriptedModel([say('sunny'), say('still sunny')]);
      const agent = scriptedAgent({
        name: 'guide',
        model,
        outputKey: 'mood',
        instruction:
          'Topic {topic}; count {count}; flag {flag}; none {nothing}; name {user:name}; prefs {user:prefs}; ' +
          'tone {app:tone}; mood [{mood?}]; app [{app:missing?}]; user [{user:missing?}]; temp [{temp:missing?}]',
      });
      const runner = runnerFor(appName, agent, service);
      expect(errorsOf(await turn(runner, 'alice', 'a1', 'first'))).toEqual([]);
      expect(errorsOf(await turn(runner, 'alice', 'a1', 'second'))).toEqual([]);
      model.assertDrained();
      const fixed =
        'Topic tides; count 3; flag false; none null; name Ada; prefs {"lang":"fr","n":2}; tone calm; mood [';
      const tail = ']; app []; user []; temp []';
      expect(model.instructions).toEqual([`${fixed}${tail}`, `${fixed}sunny${tail}`]);
    });

    test('a temp: value passes between the agents of one SequentialAgent invocation and is gone in the next', async (kit) => {
      const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
      const drafterModel = new ScriptedModel([say('draft one'), say('draft two')]);
      const reviewerModel = new ScriptedModel([say('ok one'), say('ok two')]);
      const root = pipeline('writers', [
        scriptedAgent({
          name: 'drafter',
          model: drafterModel,
          instruction: 'Previous draft: [{temp:draft?}]',
          outputKey: 'temp:draft',
        }),
        scriptedAgent({
          name: 'reviewer',
          model: reviewerModel,
          instruction: 'Review: {temp:draft}',
          outputKey: 'review',
        }),
      ]);
      const runner = runnerFor(appName, root, service);

      const first = await turn(runner, 'alice', 's1', 'Write something.');
      expect(errorsOf(first)).toEqual([]);
      expect(first.map((event) => event.author)).toEqual(['drafter', 'reviewer']);
      expect(reviewerModel.instructions).toEqual(['Review: draft one']);
      let stored = await kit.reload(session);
      expect(plain(stored.state)).toEqual({ review: 'ok one' });
      expect(storedDeltaKeys(stored)).toEqual(['review']);

      const second = await turn(runner, 'alice', 's1', 'Again.');
      expect(errorsOf(second)).toEqual([]);
      drafterModel.assertDrained();
      reviewerModel.assertDrained();
      // The next invocation starts without the value: the optional template renders empty.
      expect(drafterModel.instructions).toEqual(['Previous draft: []', 'Previous draft: []']);
      expect(reviewerModel.instructions).toEqual(['Review: draft one', 'Review: draft two']);
      stored = await kit.reload(session);
      expect(plain(stored.state)).toEqual({ review: 'ok two' });
      expect(storedDeltaKeys(stored)).toEqual(['review', 'review']);
      expect(await service.getUserState({ appName, userId: 'alice' })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({});
    });

    // Once as every service reads, once with whole reads sharing the cached events, frozen.
    for (const [suffix, serviceOptions] of [
      ['', {}],
      [' (whole reads sharing frozen events)', { shareReadEvents: true }],
    ] as const) {
      test(`a multi-turn Runner conversation with tools and several agents stores exactly the events it yielded${suffix}`, async (kit) => {
        const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 'chat', serviceOptions });
        const countVisit = stateTool('count_visit', (state) => {
          const visits = (state.get('visits', 0) as number) + 1;
          state.set('visits', visits);
          state.set('temp:visit', visits);
          return { visits };
        });
        const rememberUser = stateTool('remember_user', (state) => {
          state.set('user:seen', true);
          state.set('app:visitors', (state.get('app:visitors', 0) as number) + 1);
          return { ok: true };
        });
        const clerkModel = new ScriptedModel([
          callTool('count_visit'),
          callTool('remember_user'),
          say('hello'),
          callTool('count_visit'),
          say('again'),
          callTool('count_visit'),
          say('third'),
        ]);
        const scribeModel = new ScriptedModel([say('summary 1'), say('summary 2'), say('summary 3')]);
        const root = pipeline('desk', [
          scriptedAgent({
            name: 'clerk',
            model: clerkModel,
            instruction: 'Visits so far: {visits?}',
            outputKey: 'temp:greeting',
            tools: [countVisit, rememberUser],
          }),
          scriptedAgent({
            name: 'scribe',
            model: scribeModel,
            instruction: 'Visit {visits} ({temp:visit}); greeting {temp:greeting}; seen {user:seen?}',
            outputKey: 'summary',
          }),
        ]);
        const runner = runnerFor(appName, root, service);

        const messages = ['hi', 'hi again', 'one more'];
        const expectedLog: string[] = [];
        const userEventAt: number[] = [];
        for (const message of messages) {
          let yielded: Event[] = [];
          let failure: unknown;
          try {
            yielded = await turn(runner, 'alice', 'chat', message);
          } catch (error) {
            failure = error;
          }
          expect(failure, `turn "${message}" failed`).toBeUndefined();
          expect(errorsOf(yielded)).toEqual([]);
          userEventAt.push(expectedLog.length);
          expectedLog.push('(user)');
          expectedLog.push(...yielded.map((event) => event.id));
        }
        clerkModel.assertDrained();
        scribeModel.assertDrained();
        expect(clerkModel.instructions).toEqual([
          'Visits so far: ',
          'Visits so far: 1',
          'Visits so far: 1',
          'Visits so far: 1',
          'Visits so far: 2',
          'Visits so far: 2',
          'Visits so far: 3',
        ]);
        expect(scribeModel.instructions).toEqual([
          'Visit 1 (1); greeting hello; seen true',
          'Visit 2 (2); greeting again; seen true',
          'Visit 3 (3); greeting third; seen true',
        ]);

        const stored = await kit.reload(session);
        const storedIds = ids(stored);
        expect(storedIds).toHaveLength(expectedLog.length);
        userEventAt.forEach((index, n) => {
          expect(stored.events[index]?.author).toBe('user');
          expect(textOf(stored.events[index])).toBe(messages[n]);
          expectedLog[index] = storedIds[index] as string;
        });
        expect(storedIds).toEqual(expectedLog);
        expect(new Set(storedIds).size).toBe(storedIds.length);
        expect(storedDeltaKeys(stored).filter((key) => key.startsWith('temp:'))).toEqual([]);
        expect(plain(stored.state)).toEqual({
          visits: 3,
          summary: 'summary 3',
          'user:seen': true,
          'app:visitors': 1,
        });
      });
    }

    test('two parallel branches writing one key: the branch that wrote last keeps it as stored, in every scope, as ADK keeps it in the running session', async (kit) => {
      const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
      // Branch "early" writes first, then waits until branch "late" has written and its event is stored.
      let lateStored: () => void = () => {};
      const lateIsStored = new Promise<void>((resolve) => {
        lateStored = resolve;
      });
      const mark = (name: string, wait?: Promise<void>) =>
        stateTool('mark', async (state) => {
          for (const key of ['winner', 'user:winner', 'app:winner']) state.set(key, name);
          await wait;
          return { marked: name };
        });
      const branch = (name: string, wait?: Promise<void>) =>
        scriptedAgent({
          name,
          model: new ScriptedModel([callTool('mark'), say(`${name} done`)]),
          tools: [mark(name, wait)],
        });
      const watching = watchAppends(service, (event) => {
        const response = event.content?.parts?.[0]?.functionResponse;
        if (event.author === 'late' && response) lateStored();
      });
      const agent = new ParallelAgent({ name: 'both', subAgents: [branch('early', lateIsStored), branch('late')] });
      const yielded = await turn(runnerFor(appName, agent, watching), 'alice', 's1', 'Go.');
      expect(errorsOf(yielded)).toEqual([]);
      const responses = yielded.filter((event) => event.content?.parts?.[0]?.functionResponse);
      // The later write's event was appended first; the earlier write's event, appended after it, must not win.
      expect(responses.map((event) => event.author)).toEqual(['late', 'early']);
      const expected = { winner: 'late', 'user:winner': 'late', 'app:winner': 'late' };
      expect(plain((await kit.reload(session)).state)).toEqual(expected);
      expect(await service.getUserState({ appName, userId: 'alice' })).toEqual({ winner: 'late' });
      expect(await service.getAppState({ appName })).toEqual({ winner: 'late' });
    });

    test("Runner.runAsync for an unknown session fails with ADK's own 'Session not found' error", async (kit) => {
      const { service, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
      const model = new ScriptedModel([]);
      const runner = runnerFor(appName, scriptedAgent({ name: 'nobody', model, instruction: 'x' }), service);
      // ADK's words, which name the session id (later ADK versions add the app and the user).
      await expect(turn(runner, 'alice', 'missing', 'hello')).rejects.toThrow(/^Session not found\b.*\bmissing\b/);
      // Another user's session with the same id is not found either.
      await expect(turn(runner, 'bob', 's1', 'hello')).rejects.toThrow(/^Session not found\b.*\bs1\b/);
      expect(model.requests).toEqual([]);
      expect(ids(await kit.reload(session))).toEqual([]);
    });

    test(
      'after a restart, a second service renders the templates from the stored state',
      async (kit) => {
        const { service: first, session, appName } = await kit.fresh({ userId: 'alice', sessionId: 's1' });
        const remember = stateTool('remember', (state) => {
          state.set('topic', 'tides');
          state.set('user:name', 'Ada');
          state.set('app:tone', 'calm');
          state.set('temp:scratch', 'gone');
          return { saved: true };
        });
        const writerModel = new ScriptedModel([callTool('remember'), say('saved')]);
        const writer = scriptedAgent({
          name: 'keeper',
          model: writerModel,
          instruction: 'Keep notes.',
          outputKey: 'last',
          tools: [remember],
        });
        const before = await turn(runnerFor(appName, writer, first), 'alice', 's1', 'Remember.');
        expect(errorsOf(before)).toEqual([]);
        writerModel.assertDrained();
        const storedBefore = ids(await kit.reload(session));

        const restarted = await kit.service();
        const template =
          'Topic [{topic?}]; name {user:name}; tone {app:tone}; last [{last?}]; scratch [{temp:scratch?}]';
        const readerModel = new ScriptedModel([say('ok'), say('ok too')]);
        const reader = scriptedAgent({ name: 'keeper', model: readerModel, instruction: template });
        const runner = runnerFor(appName, reader, restarted);
        const after = await turn(runner, 'alice', 's1', 'What do you know?');
        await restarted.createSession({ appName, userId: 'alice', sessionId: 's2' });
        expect(errorsOf([...after, ...(await turn(runner, 'alice', 's2', 'And here?'))])).toEqual([]);
        readerModel.assertDrained();
        expect(readerModel.instructions).toEqual([
          'Topic [tides]; name Ada; tone calm; last [saved]; scratch []',
          'Topic []; name Ada; tone calm; last []; scratch []',
        ]);
        const stored = await kit.reload(session, { service: restarted });
        expect(ids(stored).slice(0, storedBefore.length)).toEqual(storedBefore);
        expect(ids(stored).slice(storedBefore.length + 1)).toEqual(after.map((event) => event.id));
        expect(plain(stored.state)).toEqual({ topic: 'tides', last: 'saved', 'user:name': 'Ada', 'app:tone': 'calm' });
      },
      { requires: 'sharedBackend' },
    );
  },
};

/**
 * `service` as the Runner sees it, calling `stored` with each event once its
 * append has resolved. Every other member is the service's own, bound to it.
 */
function watchAppends<T extends object>(service: T, stored: (event: Event) => void): T {
  return new Proxy(service, {
    get(target, property) {
      if (property === 'appendEvent') {
        return async (request: { event: Event }) => {
          const appended = await (target as unknown as { appendEvent(r: unknown): Promise<Event> }).appendEvent(
            request,
          );
          stored(request.event);
          return appended;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
