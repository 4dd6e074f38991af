/** `sessionServiceFromUri`: which store each URI makes, and the errors of bad or unserved URIs. */

import { MemorySessionService } from '@adk-state/adapter-memory';
import { RedisSessionService } from '@adk-state/adapter-redis';
import { InvalidArgumentError, isAdkStateError } from '@adk-state/core';
import { freePort, type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MissingPackageError, redactUri, sessionServiceFromUri } from '../src/index.js';
import { loadOptional } from '../src/packages.js';
import { clusterNodes, firestoreLocation } from '../src/uri.js';

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describe('sessionServiceFromUri', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('memory:// is the in-process store and takes core options', async () => {
    const service = await sessionServiceFromUri('memory://', { onStale: 'reload' });
    expect(service).toBeInstanceOf(MemorySessionService);
    const session = await service.createSession({ appName: 'a', userId: 'u', state: { x: 1 } });
    expect((await service.getSession({ appName: 'a', userId: 'u', sessionId: session.id }))?.state).toEqual({ x: 1 });
  });

  it('redis:// connects to that server; close() quits the client it made', async () => {
    const first = await sessionServiceFromUri(redis.url);
    expect(first).toBeInstanceOf(RedisSessionService);
    const session = await first.createSession({ appName: 'uri-app', userId: 'u', state: { kept: true } });
    await first.close?.();
    const second = await sessionServiceFromUri(`${redis.url}/0`, { timeoutMs: 5_000 });
    try {
      const loaded = await second.getSession({ appName: 'uri-app', userId: 'u', sessionId: session.id });
      expect(loaded?.state).toEqual({ kept: true });
    } finally {
      await second.close?.();
    }
  });

  it('a closed port gives a typed error within the deadline, not a hang', async () => {
    const port = await freePort();
    const service = await sessionServiceFromUri(`redis://127.0.0.1:${port}`, { timeoutMs: 1_000 });
    try {
      const error = await rejection(service.listSessions({ appName: 'a' }));
      expect(isAdkStateError(error, 'BACKEND_ERROR')).toBe(true);
    } finally {
      await service.close?.();
    }
  });

  it('refuses what is not a URI, without echoing a password', async () => {
    for (const uri of ['', '   ', 'redis', '127.0.0.1:6379', 'redis://user:s3cret@[bad']) {
      const error = await rejection(sessionServiceFromUri(uri));
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect(error.message).not.toContain('s3cret');
    }
  });

  it('sends other schemes to @google/adk, and names the schemes served when neither knows one', async () => {
    const error = await rejection(sessionServiceFromUri('carrier-pigeon://admin:hunter2@loft'));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error.message).toContain('carrier-pigeon://admin:***@loft');
    expect(error.message).toContain('redis+cluster://');
    expect(error.message).not.toContain('hunter2');
  });

  it('a missing optional package is a MissingPackageError naming the install command', async () => {
    const error = await rejection(
      loadOptional('@adk-state/adapter-nowhere' as '@adk-state/adapter-redis', 'nowhere', ['nowhere-client']),
    );
    expect(error).toBeInstanceOf(MissingPackageError);
    expect((error as MissingPackageError).installCommand).toBe('npm install @adk-state/adapter-nowhere nowhere-client');
    expect(error.message).toContain('The nowhere:// session store needs @adk-state/adapter-nowhere');
  });
});

describe('URI parts', () => {
  it('redactUri hides only the password', () => {
    expect(redactUri('redis://:pw@h:1')).toBe('redis://:***@h:1');
    expect(redactUri('mongodb+srv://me:p%40ss@cluster0/db?x=1')).toBe('mongodb+srv://me:***@cluster0/db?x=1');
    expect(redactUri('redis://me@h')).toBe('redis://me@h');
    expect(redactUri('memory://')).toBe('memory://');
  });

  it('clusterNodes reads host:port lists, IPv6 in brackets, and refuses bad ports', () => {
    expect(clusterNodes('redis+cluster://a:7000,b:7001')).toEqual([
      { host: 'a', port: 7000 },
      { host: 'b', port: 7001 },
    ]);
    expect(clusterNodes('rediss+cluster://u:p@[::1]:7000,10.0.0.2')).toEqual([
      { host: '::1', port: 7000 },
      { host: '10.0.0.2', port: 6379 },
    ]);
    expect(() => clusterNodes('redis+cluster://a:0')).toThrow(InvalidArgumentError);
    expect(() => clusterNodes('redis+cluster://a:x,b:1')).toThrow(InvalidArgumentError);
    expect(() => clusterNodes('redis+cluster:///')).toThrow(InvalidArgumentError);
  });

  it('firestoreLocation reads the project, database and root collection', () => {
    expect(firestoreLocation('firestore://my-project')).toEqual({ projectId: 'my-project' });
    expect(firestoreLocation('firestore://my-project/other-db?root=tenants%2Ft1%2Fadk')).toEqual({
      projectId: 'my-project',
      databaseId: 'other-db',
      rootCollection: 'tenants/t1/adk',
    });
    expect(() => firestoreLocation('firestore:///db')).toThrow(InvalidArgumentError);
    expect(() => firestoreLocation('firestore://p/a/b')).toThrow(InvalidArgumentError);
    expect(() => firestoreLocation('firestore://p?rot=x')).toThrow(/unknown parameter "rot"/);
  });
});
