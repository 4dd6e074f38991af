/** Services on the outbox protocol for the tests that attack it. */
import type { Cluster, Redis } from 'ioredis';
import { RedisSessionService, type RedisSessionServiceOptions, type RedisStoreWarning } from '../../src/index.js';
import { SCRIPT_SHAS } from '../../src/store.js';

/**
 * A maker of services on the outbox protocol (`clusterProtocol`, `shards`
 * slots per app) over `client`, collecting their warnings in `warnings`:
 * entries leave an outbox 2 s after they are known applied (60 s by
 * default), and no drain runs unless a test asks for one. `over` changes
 * any option of one service.
 *
 * `closeAll()` closes every service made so far (their drains finish or are
 * abandoned): a test file calls it before it quits the shared client, since
 * a command a drain sends after QUIT makes the server reset the connection
 * and the QUIT itself fail with "Connection is closed".
 */
export function outboxServices(options: {
  client: () => Redis | Cluster;
  keyPrefix: string;
  shards: number;
  warnings: RedisStoreWarning[];
}) {
  const made: RedisSessionService[] = [];
  const make = (over: Partial<RedisSessionServiceOptions> & { client?: Redis } = {}) => {
    const service = new RedisSessionService({
      client: options.client(),
      keyPrefix: options.keyPrefix,
      shards: options.shards,
      clusterProtocol: true,
      outboxKeepMs: 2_000,
      drainIntervalMs: Number.POSITIVE_INFINITY,
      onWarning: (warning) => options.warnings.push(warning),
      ...over,
    } as RedisSessionServiceOptions);
    made.push(service);
    return service;
  };
  const closeAll = async () => {
    await Promise.all(made.splice(0).map((service) => service.close()));
  };
  return Object.assign(make, { closeAll });
}

/**
 * Quits a client that services on the outbox protocol shared. A flush or drain
 * of a service nobody closed may send a command after QUIT; the server then
 * resets the connection and ioredis rejects QUIT with "Connection is closed"
 * though the client did end (as ioredis's own Cluster#quit takes it). Any
 * other failure, or a client that did not end, still fails the caller.
 */
export async function quitShared(client: Redis): Promise<void> {
  try {
    await client.quit();
  } catch (error) {
    if (!(error instanceof Error && error.message === 'Connection is closed.' && client.status === 'end')) throw error;
  }
}

/** A client on which every run of one script fails with `message`, as a command that never left the client. */
export function failingScript(client: Redis, name: string, message: string): Redis {
  return {
    get status() {
      return client.status;
    },
    call(command: string, args: Array<string | number>) {
      if (command === 'evalsha' && args[0] === SCRIPT_SHAS[name]) return Promise.reject(new Error(message));
      return client.call(command, args);
    },
  } as unknown as Redis;
}
