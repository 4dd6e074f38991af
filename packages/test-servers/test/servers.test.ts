/** Each server starts on loopback, answers a client, and is gone once stopped. */
import { Firestore } from '@google-cloud/firestore';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  emulatorSettings,
  type FirestoreEmulator,
  googleEmulatorLauncher,
  startFirestoreEmulator,
  startNpmEmulator,
  TEST_ENV,
} from '../src/firestore/index.js';
import { accepts, freePort, freePorts } from '../src/index.js';
import { countRoundTrips, hasRedisServer, startRedisCluster, startRedisServer } from '../src/redis/index.js';

describe('free ports', () => {
  it('hands out distinct ports that nothing listens on', async () => {
    const ports = await freePorts(3);
    expect(new Set(ports).size).toBe(3);
    for (const port of [...ports, await freePort()]) expect(await accepts(port)).toBe(false);
  });
});

describe.runIf(await hasRedisServer())('redis-server', () => {
  it('starts one server that answers PING, counts round trips, and stops', async () => {
    const server = await startRedisServer();
    const client = new Redis(server.url, { connectionName: 'self-test' });
    try {
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
      expect(await client.ping()).toBe('PONG');
      const seen = await countRoundTrips(server.url, 'self-test', async () => {
        await client.set('k', 'v');
        await client.get('k');
      });
      expect(seen).toEqual({ roundTrips: 2, commands: ['set', 'get'] });
    } finally {
      client.disconnect();
      await server.stop();
    }
    expect(await accepts(server.port)).toBe(false);
  });

  it('starts a cluster of three masters that serves every slot, and stops it', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    try {
      expect(cluster.nodes).toHaveLength(3);
      for (const node of cluster.nodes) {
        const client = new Redis(node.port, node.host);
        try {
          const info = String(await client.call('cluster', 'info'));
          expect(info).toContain('cluster_state:ok');
          expect(info).toContain('cluster_slots_assigned:16384');
        } finally {
          client.disconnect();
        }
      }
    } finally {
      await cluster.stop();
    }
    for (const node of cluster.nodes) expect(await accepts(node.port)).toBe(false);
  });
});

/** Writes a document through a client of `emulator` and reads it back, then stops both. */
async function answersAndStops(emulator: FirestoreEmulator): Promise<void> {
  const firestore = new Firestore(emulatorSettings(emulator.hostPort));
  try {
    expect(emulator.host).toBe('127.0.0.1');
    expect(emulator.hostPort).toBe(`127.0.0.1:${emulator.port}`);
    expect(emulator.description).toContain(emulator.hostPort);
    const doc = firestore.collection('self_test').doc('ping');
    await doc.set({ at: 1 });
    expect((await doc.get()).get('at')).toBe(1);
  } finally {
    await firestore.terminate();
    await emulator.stop();
  }
  expect(await accepts(emulator.port)).toBe(false);
}

describe('the Firestore emulator', () => {
  it('runs every test process with the client environment', () => {
    for (const [name, value] of Object.entries(TEST_ENV)) expect(process.env[name], name).toBe(value);
    expect(process.env.METADATA_SERVER_DETECTION).toBe('none');
  });

  it("starts Google's emulator when it is installed, else the npm one; it answers a client and stops", async () => {
    const emulator = await startFirestoreEmulator();
    const google = googleEmulatorLauncher() !== undefined && process.env.ADK_STATE_FIRESTORE_EMULATOR !== 'npm';
    expect(emulator.kind).toBe(google ? 'google' : 'third-party');
    await answersAndStops(emulator);
  });

  it('starts the npm emulator on loopback; it answers a client and stops', async () => {
    await answersAndStops(await startNpmEmulator());
  });
});
