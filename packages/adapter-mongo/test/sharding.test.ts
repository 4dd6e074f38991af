/**
 * Ready for a sharded cluster whose sessions and events collections are
 * sharded by app and user (`{ '_id.app': 1, '_id.user': 1 }`): every read and
 * write of one user's data carries both shard key fields, so mongos sends it
 * to the shard that holds that user; only a listing of a whole app names the
 * app alone. Checked on every command each operation sends, through both
 * drivers (one command for all writes with `bulkWrite`, a command per
 * collection without).
 */
import type { Session } from '@google/adk';
import { MongoClient } from 'mongodb';
import { MongoClient as LowestMongoClient } from 'mongodb-lowest';
import { afterAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('sharding');

afterAll(async () => {
  await dropDatabase(dbName);
});

type Target = 'user' | 'app' | 'none';

interface Sent {
  command: string;
  collection: string;
  target: Target;
}

function has(value: unknown, field: string): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, field);
}

/** Which shard key fields a filter pins: app and user (one user's shard), the app only, or neither. */
function targetOf(filter: Record<string, unknown> | undefined): Target {
  const id = filter?._id as Record<string, unknown> | undefined;
  const keyed = (value: unknown) => has(value, 'app') && has(value, 'user');
  if (has(id, '$in')) return (id?.$in as unknown[]).every(keyed) ? 'user' : 'none';
  if (id !== undefined) return keyed(id) ? 'user' : 'none';
  if (has(filter, '_id.app')) return has(filter, '_id.user') ? 'user' : 'app';
  return 'none';
}

/** The collection and filter of every statement of a command that reads or writes documents. */
function statements(name: string, command: Record<string, unknown>): Array<[string, Record<string, unknown>]> {
  const of = (field: string) => command[field] as Array<Record<string, unknown>>;
  switch (name) {
    case 'find':
      return [[command.find as string, command.filter as Record<string, unknown>]];
    case 'aggregate':
      return [[command.aggregate as string, of('pipeline')[0]?.$match as Record<string, unknown>]];
    case 'update':
      return of('updates').map((statement) => [command.update as string, statement.q as Record<string, unknown>]);
    case 'delete':
      return of('deletes').map((statement) => [command.delete as string, statement.q as Record<string, unknown>]);
    case 'insert':
      return of('documents').map((doc) => [command.insert as string, { _id: doc._id }]);
    case 'bulkWrite': {
      const namespaces = of('nsInfo').map((info) => String(info.ns).slice(String(info.ns).indexOf('.') + 1));
      return of('ops').map((op) => {
        const index = (op.insert ?? op.update ?? op.delete) as number;
        const filter = op.document ? { _id: (op.document as Record<string, unknown>)._id } : op.filter;
        return [namespaces[index] as string, filter as Record<string, unknown>];
      });
    }
    case 'findAndModify':
      return [[command.findAndModify as string, command.query as Record<string, unknown>]];
    default:
      return [];
  }
}

const drivers = [
  ['mongodb 7', (url: string) => new MongoClient(url, { monitorCommands: true })],
  ['mongodb 6.0.0', (url: string) => new LowestMongoClient(url, { monitorCommands: true }) as unknown as MongoClient],
] as const;

describe.each(drivers)('the shard key in every command (%s)', (_name, makeClient) => {
  it("every operation on one user's data names the app and the user; only an app-wide listing names the app alone", async () => {
    const client = makeClient(mongoUrl());
    const sent: Sent[] = [];
    client.on('commandStarted', (started) => {
      for (const [collection, filter] of statements(started.commandName, started.command)) {
        sent.push({ command: started.commandName, collection, target: targetOf(filter) });
      }
    });
    const service = new MongoSessionService({ client, dbName });
    const expiring = new MongoSessionService({ client, dbName: `${dbName}_ttl`, expireAfterCreateSeconds: 60 });
    try {
      await service.ready();
      await expiring.ready();
      const appName = uniqueApp();
      const key = { appName, userId: 'u1', sessionId: 's1' };
      const byOperation = new Map<string, Sent[]>();
      const record = async (operation: string, run: () => Promise<unknown>) => {
        sent.length = 0;
        await run();
        byOperation.set(operation, [...sent]);
      };
      let session = undefined as unknown as Session;
      await record('createSession', async () => {
        session = await service.createSession({ ...key, state: { a: 1, 'user:b': 1, 'app:c': 1 } });
      });
      await record('createSession (exists)', () => service.createSession(key).catch(() => undefined));
      await record('appendEvent', () =>
        service.appendEvent({ session, event: event({ a: 2, 'user:b': 2, 'app:c': 2 }) }),
      );
      const stale = (await service.getSession(key)) as Session;
      await service.appendEvent({ session, event: event() });
      await record('appendEvent (stale)', () => service.appendEvent({ session: stale, event: event() }).catch(() => 0));
      await record('getSession', () => service.getSession(key));
      await record('getSession (recent)', () => service.getSession({ ...key, config: { numRecentEvents: 1 } }));
      await record('getSession (after)', () => service.getSession({ ...key, config: { afterTimestamp: 0 } }));
      await record('listSessions (user)', () => service.listSessions({ appName, userId: 'u1' }));
      await record('getUserState', () => service.getUserState(key));
      await record('getAppState', () => service.getAppState({ appName }));
      await record('importSession', () =>
        service.importSession({ ...session, id: 'copied', events: [event({ x: 1 })] } as Session),
      );
      await record('deleteSession', () => service.deleteSession(key));
      await record('createSession (with a time-to-live)', () => expiring.createSession(key));
      await record('listSessions (app)', () => service.listSessions({ appName }));

      for (const [operation, statementsSent] of byOperation) {
        expect(statementsSent.length, operation).toBeGreaterThan(0);
        const expected = operation === 'listSessions (app)' ? ['app', 'user'] : ['user'];
        for (const statement of statementsSent) {
          expect(expected, `${operation}: ${statement.command} on ${statement.collection}`).toContain(statement.target);
        }
      }
      // The app-wide listing: the count and the page name the app only (every shard holding it answers), the buckets both.
      expect(byOperation.get('listSessions (app)')?.map((statement) => statement.target)).toEqual([
        'app',
        'app',
        'user',
      ]);
    } finally {
      await client.db(`${dbName}_ttl`).dropDatabase();
      await client.close();
    }
  });
});
