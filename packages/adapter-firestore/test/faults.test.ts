/**
 * Deadlines and honest outcomes at the store's seams, with faults injected
 * into a real client: what the client is asked to do within a call, and
 * what a failed transaction reports.
 */
import { randomUUID } from 'node:crypto';
import { AlreadyExistsError, BackendError } from '@adk-state/core';
import { createEvent } from '@google/adk';
import type { Firestore, Transaction } from '@google-cloud/firestore';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachDeadlines, ROLLBACK_MS, withCall } from '../src/calls.js';
import { FirestoreSessionService } from '../src/index.js';
import { emulatorClient } from './support/client.js';

let firestore: Firestore;
const rootCollection = `runs/${randomUUID()}/adk_state`;

beforeAll(() => {
  firestore = emulatorClient();
});

afterAll(async () => {
  await firestore.terminate();
});

const app = () => `app-${randomUUID()}`;

/**
 * The real client, except that every read-write transaction runs through
 * `wrap` (which gets the body and the real runTransaction).
 */
function faulty(
  wrap: (body: (tx: Transaction) => Promise<unknown>, real: Firestore['runTransaction']) => Promise<unknown>,
): Firestore {
  const client = Object.create(firestore) as Firestore;
  const real = firestore.runTransaction.bind(firestore) as Firestore['runTransaction'];
  Object.defineProperty(client, 'runTransaction', {
    value: (body: (tx: Transaction) => Promise<unknown>, options?: { readOnly?: boolean }) =>
      options?.readOnly ? real(body, options) : wrap(body, real),
  });
  return client;
}

function grpcError(code: number, text: string): Error {
  return Object.assign(new Error(`${code} ${text}`), { code });
}

describe('deadlines reach the client', () => {
  it('every RPC sent within a call carries the time left as its timeout; outside a call nothing changes', () => {
    const retry = { retryCodes: [14], backoffSettings: { totalTimeoutMillis: 600_000, maxRpcTimeoutMillis: 60_000 } };
    const client = {
      createCallOptions(methodName: string): Record<string, unknown> {
        return { otherArgs: { methodName }, ...(methodName === 'commit' ? { retry } : {}) };
      },
    };
    expect(attachDeadlines(client)).toBe(true);
    expect(attachDeadlines(client)).toBe(true);
    expect(client.createCallOptions('batchGetDocuments')).toEqual({ otherArgs: { methodName: 'batchGetDocuments' } });
    const call = { signal: new AbortController().signal, deadline: Date.now() + 5_000 };
    return withCall(call, async () => {
      await Promise.resolve();
      const read = client.createCallOptions('batchGetDocuments') as unknown as {
        timeout: number;
        retryRequestOptions: unknown;
      };
      expect(read.timeout).toBeGreaterThan(4_000);
      expect(read.timeout).toBeLessThanOrEqual(5_000);
      // A stream is not retried within an attempt (the client's own attempts remain).
      expect(read.retryRequestOptions).toEqual({ retries: 0, noResponseRetries: 0 });
      const commit = client.createCallOptions('commit') as unknown as { timeout: number; retry: typeof retry };
      expect(commit.retry.backoffSettings.totalTimeoutMillis).toBeLessThanOrEqual(5_000);
      expect(commit.retry.retryCodes).toEqual([14]);
      // The client's shared defaults are left alone.
      expect(retry.backoffSettings.totalTimeoutMillis).toBe(600_000);
      // A rollback releases the locks of an abandoned transaction: a bound of its own, past the call's.
      const rollback = client.createCallOptions('rollback') as unknown as { timeout: number };
      expect(rollback.timeout).toBeGreaterThan(ROLLBACK_MS - 1_000);
      expect(rollback.timeout).toBeLessThanOrEqual(ROLLBACK_MS);
      expect(rollback).not.toHaveProperty('retryRequestOptions');
    });
  });

  it('leaves a client without the hook alone', () => {
    expect(attachDeadlines({})).toBe(false);
  });
});

describe('honest outcomes', () => {
  it('a transaction that fails before its commit is sent says nothing was written', async () => {
    const client = faulty(async (body, real) =>
      real(async (tx) => {
        await Promise.resolve();
        throw grpcError(14, 'UNAVAILABLE: connection refused');
        // biome-ignore lint/correctness/noUnreachable: the body is never reached, as with a dead backend
        return body(tx);
      }),
    );
    const service = new FirestoreSessionService({ firestore: client, rootCollection });
    const error = await service.createSession({ appName: app(), userId: 'u', sessionId: 's' }).catch((e) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).mayHaveApplied).toBe(false);
    expect((error as BackendError).message).toContain('Nothing was written');
  });

  it('a commit whose outcome is unknown may have been applied', async () => {
    const appName = app();
    const healthy = new FirestoreSessionService({ firestore, rootCollection });
    const session = await healthy.createSession({ appName, userId: 'u', sessionId: 's' });
    const client = faulty(async (body, real) => {
      await real(body);
      throw grpcError(4, 'DEADLINE_EXCEEDED: commit');
    });
    const service = new FirestoreSessionService({ firestore: client, rootCollection });
    const event = createEvent({
      invocationId: 'i',
      author: 'a',
      timestamp: Date.now(),
      actions: { stateDelta: { n: 1 } },
    });
    const error = await service.appendEvent({ session, event }).catch((e) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).mayHaveApplied).toBe(true);
  });

  it('gRPC ALREADY_EXISTS from a create commit is AlreadyExistsError', async () => {
    const client = faulty(async (body, real) => {
      await real(async (tx) => {
        await body(tx);
        // Nothing is committed: the real transaction is made to fail after the body, as a lost race would.
        throw grpcError(6, 'ALREADY_EXISTS: entity already exists');
      });
    });
    const service = new FirestoreSessionService({ firestore: client, rootCollection });
    const appName = app();
    const error = await service.createSession({ appName, userId: 'u', sessionId: 's' }).catch((e) => e);
    expect(error).toBeInstanceOf(AlreadyExistsError);
    expect(
      await new FirestoreSessionService({ firestore, rootCollection }).getSession({
        appName,
        userId: 'u',
        sessionId: 's',
      }),
    ).toBeUndefined();
  });

  /** A client whose first commit goes through but whose answer is lost: `between` runs, then the client retries. */
  const answerLost = (between: () => Promise<void>) =>
    faulty(async (body, real) => {
      await real(body);
      await between();
      return real(body);
    });

  it('an append whose answer was lost, retried by the client after another writer appended, succeeds', async () => {
    const appName = app();
    const key = { appName, userId: 'u', sessionId: 's' };
    const other = new FirestoreSessionService({ firestore, rootCollection, logCacheBytes: 0 });
    const event = (id: string, x: string) =>
      createEvent({ id, invocationId: 'i', author: 'a', timestamp: Date.now(), actions: { stateDelta: { x } } });
    const client = answerLost(async () => {
      const current = await other.getSession(key);
      await other.appendEvent({ session: current as NonNullable<typeof current>, event: event('e2', 'from e2') });
    });
    const service = new FirestoreSessionService({ firestore: client, rootCollection });
    const session = await other.createSession(key);
    await service.appendEvent({ session, event: event('e1', 'from e1') });
    const stored = await other.getSession(key);
    expect(stored?.events.map((each) => each.id)).toEqual(['e1', 'e2']);
    expect(stored?.state).toEqual({ x: 'from e2' });
  });

  it('stops a transaction at its next attempt once the deadline has passed', async () => {
    let attempts = 0;
    const client = faulty(async (body) => {
      // A client that retries without end, as under constant contention.
      for (;;) {
        attempts++;
        try {
          return await body({} as Transaction);
        } catch (error) {
          if ((error as Error).name === 'CallAbandoned') throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });
    const service = new FirestoreSessionService({ firestore: client, rootCollection, timeoutMs: 500 });
    const error = await service.createSession({ appName: app(), userId: 'u', sessionId: 's' }).catch((e) => e);
    expect(error).toBeInstanceOf(BackendError);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const seen = attempts;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(attempts).toBe(seen);
  });
});
