/**
 * Starts the npm emulator `@firestore-emulator/server` in this process,
 * bound to 127.0.0.1 on a free port. The package itself binds 0.0.0.0 on a
 * fixed port; its gRPC server is reached here to bind loopback only. Used by
 * the test run's global setup, and reusable by benchmarks.
 */
import { createRequire } from 'node:module';

/** A running emulator. `hostPort` is what `FIRESTORE_EMULATOR_HOST` expects. */
export interface FirestoreEmulator {
  host: string;
  port: number;
  hostPort: string;
  stop(): Promise<void>;
}

interface GrpcServer {
  bindAsync(address: string, credentials: unknown, callback: (error: Error | null, port: number) => void): void;
  forceShutdown(): void;
}

export async function startFirestoreEmulator(): Promise<FirestoreEmulator> {
  const require = createRequire(import.meta.url);
  const entry = require.resolve('@firestore-emulator/server');
  const { FirestoreServer } = require(entry) as { FirestoreServer: new () => unknown };
  // The emulator's own copy of grpc-js, so that its server accepts the credentials object.
  const grpc = createRequire(entry)('@grpc/grpc-js') as { ServerCredentials: { createInsecure(): unknown } };
  const server = (new FirestoreServer() as { server?: GrpcServer }).server;
  if (typeof server?.bindAsync !== 'function') {
    throw new Error('@firestore-emulator/server changed shape: its gRPC server is not reachable to bind 127.0.0.1');
  }
  const host = '127.0.0.1';
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  return {
    host,
    port,
    hostPort: `${host}:${port}`,
    async stop() {
      server.forceShutdown();
    },
  };
}
