/**
 * `@adk-state/adapter-firestore` on the emulator. Round trips are the RPCs
 * the Firestore client starts (unary requests and streams alike).
 */
import { existsSync } from 'node:fs';
import type { Event } from '@google/adk';
import { type FirestoreBackend, firestoreBackend } from '../backends/firestore.js';
import { firestoreSeeder } from './firestore-seed.js';
import { defineTarget, type OpenTarget, type Seeder, type SessionKey } from './types.js';

/**
 * A bulk seeder in the adapter's test support, with the signature of the
 * MongoDB adapter's: used when present, else the bench's own (seeding
 * through the service's calls would take minutes on the emulator).
 */
const SEEDER = new URL('../../../adapter-firestore/test/support/seed.ts', import.meta.url);

interface SeedModule {
  seedHistory(store: unknown, key: SessionKey, events: Event[]): Promise<void>;
  seedSessions(store: unknown, appName: string, users: string[], count: number): Promise<void>;
}

async function adapterSeeder(store: unknown): Promise<Seeder | undefined> {
  if (!existsSync(SEEDER)) return undefined;
  const module = (await import(SEEDER.href)) as Partial<SeedModule>;
  const { seedHistory, seedSessions } = module;
  if (typeof seedHistory !== 'function' || typeof seedSessions !== 'function') return undefined;
  return {
    history: (key, events) => seedHistory(store, key, events),
    sessions: (appName, users, count) => seedSessions(store, appName, users, count),
  };
}

type Rpc = (...args: unknown[]) => unknown;

const ROOT_COLLECTION = 'adk_state_bench';

export const firestoreStore = defineTarget<FirestoreBackend>({
  id: 'firestore',
  label: 'adk-state Firestore',
  kind: 'store',
  backend: firestoreBackend,
  async open(backend): Promise<OpenTarget> {
    const { FirestoreSessionService } = await import('@adk-state/adapter-firestore');
    const firestore = backend.client();
    let rpcs = 0;
    // Every RPC of @google-cloud/firestore goes through one of these two methods.
    const methods = firestore as unknown as Record<'request' | 'requestStream', Rpc>;
    for (const name of ['request', 'requestStream'] as const) {
      const original = methods[name];
      if (typeof original !== 'function')
        throw new Error(`@google-cloud/firestore has no ${name}() to count RPCs with`);
      methods[name] = function counted(this: unknown, ...args: unknown[]) {
        rpcs++;
        return original.apply(this, args);
      };
    }
    const service = new FirestoreSessionService({ firestore, rootCollection: ROOT_COLLECTION });
    const own = await adapterSeeder(service.store);
    return {
      service,
      seed: own ?? firestoreSeeder(service, firestore, ROOT_COLLECTION),
      details: own
        ? "read data written by the adapter's bulk seeder"
        : "read data written by the bench's bulk seeder on the adapter's layout (one session and one event through the service, the rest in batches), checked by reading it back",
      roundTrips: {
        unit: 'RPCs started by the @google-cloud/firestore client',
        service,
        async count(operation) {
          rpcs = 0;
          await operation();
          return rpcs;
        },
      },
      async close() {
        await firestore.terminate();
      },
    };
  },
});
