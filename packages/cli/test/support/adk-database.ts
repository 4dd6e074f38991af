/**
 * A store of `@google/adk`'s own DatabaseSessionService for the migration
 * tests from SQL sources: what is written into it, and how its copy must
 * read.
 */
import { RedisSessionService } from '@adk-state/adapter-redis';
import { createEvent, createEventActions, DatabaseSessionService } from '@google/adk';
import { expect } from 'vitest';
import { runCli } from './cli-process.js';

/**
 * Through ADK's DatabaseSessionService on `uri`: app `greeter`, users `ada`
 * and `bob`, a session each with state `{ topic }` and three turns that
 * write `turn` and `user:seen`. Closes the service's connection.
 */
export async function writeAdkSessions(uri: string): Promise<void> {
  const adk = new DatabaseSessionService(uri);
  try {
    for (const userId of ['ada', 'bob']) {
      const session = await adk.createSession({ appName: 'greeter', userId, state: { topic: userId } });
      for (let turn = 1; turn <= 3; turn++) {
        const event = createEvent({
          author: 'greeter',
          invocationId: `turn-${turn}`,
          content: { role: 'model', parts: [{ text: `reply ${turn} to ${userId}` }] },
          actions: createEventActions({ stateDelta: { turn, 'user:seen': turn } }),
        });
        await adk.appendEvent({ session, event });
      }
    }
  } finally {
    await (adk as unknown as { orm?: { close(): Promise<void> } }).orm?.close();
  }
}

/** The texts of the events {@link writeTiedSession} appends, in the order it appends them. */
export const TIED_TEXTS = ['call', 'answer', 'reply', 'aside', 'later'];

/**
 * Through ADK's DatabaseSessionService on `uri`: app `ties`, user `ada`,
 * session `s1` with the events of {@link TIED_TEXTS}, all but the last of
 * one millisecond. Closes the service's connection.
 */
export async function writeTiedSession(uri: string): Promise<void> {
  const adk = new DatabaseSessionService(uri);
  try {
    const session = await adk.createSession({ appName: 'ties', userId: 'ada', sessionId: 's1' });
    for (const [index, text] of TIED_TEXTS.entries()) {
      const event = createEvent({ invocationId: 'i1', author: 'agent', content: { role: 'model', parts: [{ text }] } });
      event.timestamp = 1_700_000_000_000 + (index === TIED_TEXTS.length - 1 ? 1 : 0);
      await adk.appendEvent({ session, event });
    }
  } finally {
    await (adk as unknown as { orm?: { close(): Promise<void> } }).orm?.close();
  }
}

/** `migrate --verify` of {@link writeTiedSession}'s store `source` into the Redis store at `target`: the copy's events come in the order they were appended. */
export async function expectTiesCopiedInOrder(source: string, target: string): Promise<void> {
  const run = await runCli(['migrate', '--from', source, '--to', target, '--app', 'ties', '--verify']);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('verify: 0 differences');
  const copy = new RedisSessionService({ url: target });
  try {
    const read = await copy.getSession({ appName: 'ties', userId: 'ada', sessionId: 's1' });
    expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual(TIED_TEXTS);
  } finally {
    await copy.close();
  }
  const again = await runCli(['migrate', '--from', source, '--to', target, '--app', 'ties']);
  expect(again.stdout).toContain('copied 0 new and 0 updated sessions (0 events); 1 unchanged');
}

/** `ada`'s session as the Redis store at `url` holds the copy: its events in order, and its state. */
export async function expectAdaCopied(url: string): Promise<void> {
  const copy = new RedisSessionService({ url });
  try {
    const { sessions } = await copy.listSessions({ appName: 'greeter', userId: 'ada' });
    const read = await copy.getSession({ appName: 'greeter', userId: 'ada', sessionId: sessions[0]?.id ?? '' });
    expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual([
      'reply 1 to ada',
      'reply 2 to ada',
      'reply 3 to ada',
    ]);
    expect(read?.state).toEqual({ topic: 'ada', turn: 3, 'user:seen': 3 });
  } finally {
    await copy.close();
  }
}

/**
 * `migrate` from `source` to `target`, then `inspect` of it: each exits 1
 * with one line that says the source is not a database ADK reads as it is,
 * `migrate`'s going on with `said`.
 */
export async function expectRefused(source: string, said: string, target: string): Promise<void> {
  const copied = await runCli(['migrate', '--from', source, '--to', target]);
  expect(copied.code, copied.stdout + copied.stderr).toBe(1);
  expect(copied.stderr.trim().split('\n')).toHaveLength(1);
  expect(copied.stderr).toContain(
    `adk-state migrate: the source ${source} is not a database ADK reads as it is: ${said}`,
  );
  const inspected = await runCli(['inspect', source, '--app', 'greeter']);
  expect(inspected.code, inspected.stdout + inspected.stderr).toBe(1);
  expect(inspected.stderr).toContain(`adk-state inspect: the store ${source} is not a database ADK reads as it is`);
}
