/**
 * A client that finds no credentials: the store's calls fail at once with a
 * typed error that names the cause, and leave no unhandled rejection behind
 * (the client's own methods drop one per request when it cannot set itself
 * up). No emulator and no network: the client gives up before it connects.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackendError } from '@adk-state/core';
import { createEvent } from '@google/adk';
import { Firestore } from '@google-cloud/firestore';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FirestoreSessionService } from '../src/index.js';

/** The variables that would give the client credentials or the emulator, cleared for this file's tests. */
const CLEARED = ['FIRESTORE_EMULATOR_HOST', 'GOOGLE_APPLICATION_CREDENTIALS', 'CLOUDSDK_CONFIG', 'APPDATA'] as const;

const saved = new Map<string, string | undefined>();
let home: string;
const unhandled: unknown[] = [];
const record = (reason: unknown) => unhandled.push(reason);

beforeAll(() => {
  // An empty home: no application default credentials file either.
  home = mkdtempSync(join(tmpdir(), 'adk-state-no-credentials-'));
  for (const name of [...CLEARED, 'HOME']) saved.set(name, process.env[name]);
  for (const name of CLEARED) delete process.env[name];
  process.env.HOME = home;
  process.on('unhandledRejection', record);
});

afterAll(() => {
  process.off('unhandledRejection', record);
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  rmSync(home, { recursive: true, force: true });
});

describe('a client without credentials', () => {
  it('fails every call at once with an authentication BackendError, and no rejection goes unhandled', async () => {
    const firestore = new Firestore({ projectId: 'adk-state-test' });
    const service = new FirestoreSessionService({ firestore, rootCollection: 'no_credentials', timeoutMs: 20_000 });
    const key = { appName: 'a', userId: 'u', sessionId: 's' };
    const session = { id: 's', appName: 'a', userId: 'u', state: {}, events: [], lastUpdateTime: 1 };
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['getSession', () => service.getSession(key)],
      ['createSession', () => service.createSession(key)],
      ['appendEvent', () => service.appendEvent({ session, event: createEvent({ invocationId: 'i', author: 'a' }) })],
      ['listSessions', () => service.listSessions({ appName: 'a' })],
      ['deleteSession', () => service.deleteSession(key)],
      ['getAppState', () => service.getAppState({ appName: 'a' })],
    ];
    try {
      for (const [operation, call] of calls) {
        const error = await call().then(
          () => undefined,
          (failure: unknown) => failure,
        );
        expect(error, operation).toBeInstanceOf(BackendError);
        expect(error, operation).toMatchObject({ kind: 'authentication', mayHaveApplied: false, timedOut: false });
        expect((error as Error).message, operation).toContain('Could not load the default credentials');
      }
      // What the client drops surfaces within a turn or two of the event loop.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(unhandled).toEqual([]);
    } finally {
      await service.close();
      // The client's own terminate fails the same way (it closes clients that never set up): the caller's to catch.
      await firestore.terminate().catch(() => undefined);
    }
  });
});
