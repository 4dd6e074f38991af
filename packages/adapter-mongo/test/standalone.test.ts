/**
 * On a standalone server (no transactions) the store refuses every
 * operation with StandaloneServerError on first use, before writing anything.
 */

import { type StandIn, startStandIn } from '@adk-state/mongo-standin';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService, StandaloneServerError } from '../src/index.js';

let standalone: StandIn;

beforeAll(async () => {
  standalone = await startStandIn({ replicaSet: false, ttlMonitorIntervalMs: 0 });
});

afterAll(async () => {
  await standalone.stop();
});

describe('a standalone server', () => {
  it('is refused with StandaloneServerError, and nothing is written', async () => {
    const service = new MongoSessionService({ url: standalone.url, dbName: 'standalone' });
    const session = { id: 's1', appName: 'app', userId: 'u1', state: {}, events: [], lastUpdateTime: 0 };
    try {
      const attempts: Array<Promise<unknown>> = [
        service.createSession({ appName: 'app', userId: 'u1', sessionId: 's1', state: { 'app:x': 1 } }),
        service.getSession({ appName: 'app', userId: 'u1', sessionId: 's1' }),
        service.listSessions({ appName: 'app' }),
        service.deleteSession({ appName: 'app', userId: 'u1', sessionId: 's1' }),
        service.getAppState({ appName: 'app' }),
        service.ready(),
      ];
      // Every outcome is taken at once: the calls fail together, and a rejection left waiting for its turn would be unhandled.
      const outcomes = attempts.map((attempt) =>
        attempt.then(
          () => undefined,
          (failure: unknown) => failure,
        ),
      );
      for (const outcome of outcomes) {
        const error = await outcome;
        expect(error).toBeInstanceOf(StandaloneServerError);
        expect((error as StandaloneServerError).code).toBe('BACKEND_ERROR');
        expect((error as Error).message).toContain('standalone server');
        expect((error as Error).message).toContain('--replSet');
      }
      const appended = await service
        .appendEvent({ session, event: { id: 'e1', timestamp: 1 } as never })
        .catch((e) => e);
      expect(appended).toBeInstanceOf(StandaloneServerError);
    } finally {
      await service.close();
    }
    const inspector = new MongoClient(standalone.url);
    try {
      expect(await inspector.db('standalone').listCollections().toArray()).toEqual([]);
    } finally {
      await inspector.close();
    }
    // Beyond the handshake's hello, the server saw no write, index or transaction command.
    const seen = Object.keys(standalone.commandCounts());
    expect(seen.filter((name) => !['endSessions', 'listCollections'].includes(name))).toEqual([]);
  });
});
