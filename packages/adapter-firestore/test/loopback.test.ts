import dns from 'node:dns';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { emulatorClient } from './support/client.js';
import { guardRecord, isLoopback } from './support/loopback.js';

describe('the loopback guard', () => {
  it('runs with metadata-server detection off and the emulator on loopback', () => {
    expect(process.env.METADATA_SERVER_DETECTION).toBe('none');
    const host = (process.env.FIRESTORE_EMULATOR_HOST ?? '').replace(/:\d+$/, '');
    expect(isLoopback(host)).toBe(true);
  });

  it('lets the Firestore client reach the emulator on loopback', async () => {
    const before = guardRecord().loopbackConnections;
    const firestore = emulatorClient();
    try {
      await firestore.collection('loopback_check').doc('ping').set({ at: 1 });
      expect((await firestore.collection('loopback_check').doc('ping').get()).get('at')).toBe(1);
    } finally {
      await firestore.terminate();
    }
    expect(guardRecord().loopbackConnections).toBeGreaterThan(before);
    expect(guardRecord().refused).toEqual([]);
  });

  it('refuses and records anything else before it connects', async () => {
    // 127.0.0.2 is outside the allowed hosts yet still on this machine, so even a broken guard sends nothing out.
    const record = guardRecord();
    const socket = net.connect({ host: '127.0.0.2', port: 9 });
    const error = await new Promise<Error>((resolve) => socket.once('error', resolve));
    expect(error.message).toContain('loopback guard');
    const lookup = await new Promise<Error | null>((resolve) => dns.lookup('127.0.0.2', (failure) => resolve(failure)));
    expect(lookup?.message).toContain('loopback guard');
    expect(record.refused).toEqual(['connect 127.0.0.2:9', 'lookup 127.0.0.2']);
    record.refused.length = 0;
  });

  it('knows loopback when it sees it', () => {
    for (const host of ['127.0.0.1', '::1', '[::1]', 'localhost', 'LOCALHOST']) expect(isLoopback(host)).toBe(true);
    for (const host of ['169.254.169.254', 'metadata.google.internal', '10.0.0.1', '127.0.0.2', '0.0.0.0']) {
      expect(isLoopback(host)).toBe(false);
    }
  });
});
