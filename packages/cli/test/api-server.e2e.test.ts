/**
 * `adk-state api_server` on Redis, end to end: the real command in a child
 * process, ADK's HTTP API, a sample agent on an offline model, and the data
 * read back from Redis by a second service.
 */
import { RedisSessionService } from '@adk-state/adapter-redis';
import type { RedisServer } from '@adk-state/test-servers/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliProcess, call, serveAgentsOnRedis } from './support/cli-process.js';

interface SessionJson {
  id: string;
  state: Record<string, unknown>;
  events: { author: string }[];
}

const message = (text: string) => ({ role: 'user', parts: [{ text }] });

describe('adk-state api_server --session_service_uri redis://…', () => {
  let served: Awaited<ReturnType<typeof serveAgentsOnRedis>>;
  let redis: RedisServer;
  let cli: CliProcess;

  beforeAll(async () => {
    served = await serveAgentsOnRedis('api_server');
    ({ redis, cli } = served);
  }, 90_000);

  afterAll(async () => {
    await served?.stop();
  });

  it('serves list-apps, create, list, get, run, run_sse and delete, with the sessions kept in Redis', async () => {
    const base = cli.url;
    expect(await call(base, 'GET', '/list-apps')).toEqual({ status: 200, body: ['greeter'] });

    const created = await call(base, 'POST', '/apps/greeter/users/ada/sessions', { state: { topic: 'tea' } });
    expect(created.status).toBe(200);
    const session = created.body as SessionJson;
    expect(session.state).toEqual({ topic: 'tea' });
    const named = await call(base, 'POST', '/apps/greeter/users/ada/sessions/chosen-id', { state: {} });
    expect((named.body as SessionJson).id).toBe('chosen-id');

    const listed = await call(base, 'GET', '/apps/greeter/users/ada/sessions');
    const ids = (listed.body as { sessions: SessionJson[] }).sessions.map((s) => s.id).sort();
    expect(ids).toEqual([session.id, 'chosen-id'].sort());

    const run = await call(base, 'POST', '/run', {
      appName: 'greeter',
      userId: 'ada',
      sessionId: session.id,
      newMessage: message('hello'),
    });
    expect(run.status).toBe(200);
    const runEvents = run.body as { content?: { parts?: { text?: string }[] } }[];
    expect(runEvents.at(-1)?.content?.parts?.[0]?.text).toBe('Noted: hello (turn 1)');

    const sse = await fetch(`${base}/run_sse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ appName: 'greeter', userId: 'ada', sessionId: session.id, newMessage: message('again') }),
    });
    expect(sse.headers.get('content-type')).toMatch(/text\/event-stream/);
    const frames = (await sse.text())
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)) as { content?: { parts?: { text?: string }[] } });
    expect(frames.at(-1)?.content?.parts?.[0]?.text).toBe('Noted: again (turn 2)');

    const got = await call(base, 'GET', `/apps/greeter/users/ada/sessions/${session.id}`);
    const loaded = got.body as SessionJson;
    expect(loaded.state).toEqual({ topic: 'tea', 'user:turns': 2, last_reply: 'Noted: again (turn 2)' });
    expect(loaded.events.map((event) => event.author)).toEqual([
      'user',
      'greeter',
      'greeter',
      'greeter',
      'user',
      'greeter',
      'greeter',
      'greeter',
    ]);

    // A second service, in this process, reads what the server wrote: the data is in Redis.
    const client = new Redis(redis.url);
    const reader = new RedisSessionService({ client });
    try {
      expect(await client.dbsize()).toBeGreaterThan(0);
      const stored = await reader.getSession({ appName: 'greeter', userId: 'ada', sessionId: session.id });
      expect(stored?.state).toEqual(loaded.state);
      expect(stored?.events).toHaveLength(8);
      expect(await reader.getUserState({ appName: 'greeter', userId: 'ada' })).toEqual({ turns: 2 });

      expect((await call(base, 'DELETE', '/apps/greeter/users/ada/sessions/chosen-id')).status).toBe(204);
      expect(await reader.getSession({ appName: 'greeter', userId: 'ada', sessionId: 'chosen-id' })).toBeUndefined();
      expect((await call(base, 'GET', '/apps/greeter/users/ada/sessions/chosen-id')).status).toBe(404);
    } finally {
      await reader.close();
      await client.quit();
    }
  });

  it('stops on SIGTERM, closing its Redis connection, and exits 0', async () => {
    const before = await connectedClients(redis.url);
    expect(await cli.stop('SIGTERM')).toBe(0);
    expect(cli.output()).toContain('ADK API Server stopped');
    // The server's own connection is gone: only the counting client remains.
    expect(await connectedClients(redis.url)).toBe(before - 1);
  });
});

async function connectedClients(url: string): Promise<number> {
  const client = new Redis(url);
  try {
    const list = (await client.client('LIST')) as string;
    // The counting client itself is one of them.
    return list.trim().split('\n').length - 1;
  } finally {
    await client.quit();
  }
}
