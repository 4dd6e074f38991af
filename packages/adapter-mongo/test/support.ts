/** Shared helpers of the adapter's tests: the server under test, clients, services and events. */
import { randomUUID } from 'node:crypto';
import type { OutageControl } from '@adk-state/conformance-tests';
import type { StateSessionServiceOptions } from '@adk-state/core';
import { type StandIn, type StandInVersion, startStandIn } from '@adk-state/mongo-standin';
import { createEvent, createEventActions, type Event } from '@google/adk';
import { MongoClient } from 'mongodb';
import { inject } from 'vitest';
import { MongoSessionService, type MongoSessionServiceOptions } from '../src/index.js';

/** Why the suite's expiry tests do not run here: MongoDB's TTL monitor removes expired documents once a minute. */
export const MONGO_TTL_ABSENT =
  "MongoDB's TTL monitor removes expired documents about once a minute, too late for a test";

/** The connection string of the server under test (MONGODB_URL, or the stand-in of this run). */
export function mongoUrl(): string {
  return inject('mongoUrl');
}

/** True when the server under test is the stand-in this run started. */
export function usingStandIn(): boolean {
  return inject('usingStandIn');
}

/** A database name no other test file uses, so runs against a shared server never meet. */
export function uniqueDbName(label: string): string {
  return `adk_state_test_${label}_${randomUUID().slice(0, 8)}`;
}

export function uniqueApp(label = 'app'): string {
  return `${label}-${randomUUID()}`;
}

/** A client of the server under test that records the name of every command it sends. */
export function recordingClient(): { client: MongoClient; commands: string[] } {
  const commands: string[] = [];
  const client = new MongoClient(mongoUrl(), { monitorCommands: true });
  client.on('commandStarted', (event) => commands.push(event.commandName));
  return { client, commands };
}

/** A service on a client of its own; `close()` closes that client. */
export function openService(
  dbName: string,
  options: StateSessionServiceOptions & Omit<MongoSessionServiceOptions, 'client' | 'url' | 'dbName'> = {},
): MongoSessionService {
  return new MongoSessionService({ ...options, url: mongoUrl(), dbName });
}

let clock = 1_700_000_000_000;

/** A real ADK event with a state delta and an increasing timestamp. */
export function event(stateDelta: Record<string, unknown> = {}, fields: Partial<Event> = {}): Event {
  clock += 1000;
  return createEvent({
    author: 'agent',
    invocationId: 'inv',
    timestamp: clock,
    actions: createEventActions({ stateDelta }),
    ...fields,
  });
}

export async function dropDatabase(dbName: string): Promise<void> {
  const client = new MongoClient(mongoUrl());
  try {
    await client.db(dbName).dropDatabase();
  } finally {
    await client.close();
  }
}

/** Where a conformance target's services connect, and how the suite may take that server away. */
export interface ConformanceBackend {
  url(): string;
  setup(): Promise<void>;
  teardown(): Promise<void>;
  outage: OutageControl | { absent: string };
}

/**
 * The server of one conformance target: with the stand-in, a stand-in of the
 * target's own reporting `serverVersion` (8.0 has the multi-collection
 * `bulkWrite` command), which the outage group stops (listener and
 * connections closed, data kept) and starts again on the same port; against
 * MONGODB_URL, that server, which the tests cannot stop.
 */
export function conformanceBackend(dbName: string, serverVersion: StandInVersion = '8.0'): ConformanceBackend {
  if (!usingStandIn()) {
    return {
      url: mongoUrl,
      setup: async () => {},
      teardown: () => dropDatabase(dbName),
      outage: { absent: 'the tests cannot stop the server named by MONGODB_URL' },
    };
  }
  let standIn: StandIn | undefined;
  const running = (): StandIn => {
    if (!standIn) throw new Error('the stand-in of this target is not started');
    return standIn;
  };
  return {
    url: () => running().url,
    setup: async () => {
      standIn = await startStandIn({ replicaSet: 'rs0', serverVersion });
    },
    teardown: async () => {
      await standIn?.stop();
      standIn = undefined;
    },
    outage: { stop: () => running().stop(), start: () => running().start() },
  };
}
