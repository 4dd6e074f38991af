/**
 * `@adk-state/adapter-firestore` on the emulator. Round trips are the RPCs
 * the Firestore client starts (unary requests and streams alike).
 */
import { type FirestoreBackend, firestoreBackend } from '../backends/firestore.js';
import { adapterSeeder, defineTarget, type OpenTarget } from './types.js';

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
    let documents = 0;
    // Every RPC of @google-cloud/firestore goes through one of these two methods.
    const methods = firestore as unknown as Record<'request' | 'requestStream', Rpc>;
    for (const name of ['request', 'requestStream'] as const) {
      const original = methods[name];
      if (typeof original !== 'function')
        throw new Error(`@google-cloud/firestore has no ${name}() to count RPCs with`);
      methods[name] = function counted(this: unknown, ...args: unknown[]) {
        rpcs++;
        const answer = original.apply(this, args);
        if (name === 'requestStream') countDocuments(answer, () => documents++);
        return answer;
      };
    }
    const service = new FirestoreSessionService({ firestore, rootCollection: ROOT_COLLECTION });
    const sharingReads = new FirestoreSessionService({
      firestore,
      rootCollection: ROOT_COLLECTION,
      shareReadEvents: true,
    });
    const seeding = await import('@adk-state/adapter-firestore/seed');
    return {
      service,
      sharingReads,
      documentsRead: () => documents,
      // The adapter's own bulk seeder writes the documents its appends would write.
      seed: adapterSeeder(seeding, service.store),
      details:
        "read data written by the adapter's bulk seeder (@adk-state/adapter-firestore/seed: one session and one event through the service, the rest in batches on its layout, checked by reading back)",
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
        // The services first: each waits for its calls still running in the client.
        await Promise.all([service.close(), sharingReads.close()]);
        await firestore.terminate();
      },
    };
  },
});

/**
 * Counts the documents a streamed read sends (a batched get's `found`, a
 * query's `document`): what Firestore bills reads by. The listener is added
 * when the stream is handed over, before any of its data can arrive, beside
 * the client's own.
 */
function countDocuments(answer: unknown, count: () => void): void {
  void Promise.resolve(answer).then(
    (stream) => {
      const readable = stream as { on?: (event: string, listener: (data: unknown) => void) => void };
      readable.on?.('data', (data) => {
        const response = data as { found?: unknown; document?: unknown } | null;
        if (response?.found || response?.document) count();
      });
    },
    () => undefined,
  );
}
