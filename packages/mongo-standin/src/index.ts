/**
 * A MongoDB-wire-compatible stand-in server for the tests and benchmarks of
 * adk-state, for machines where no mongod can be installed. It implements,
 * honestly, the commands and operators the MongoDB adapter uses: snapshot
 * transactions with MongoDB's write-conflict rules, unique and TTL indexes,
 * cursors, MongoDB 8's multi-collection `bulkWrite` (when it reports 8.0),
 * and a replica-set primary's (or a standalone's) handshake.
 * Anything outside that subset fails with MongoDB's error codes.
 */
import { type StandInOptions, StandInServer, type StandInVersion } from './server.js';

export type { StandInOptions, StandInVersion } from './server.js';
export { StandInServer } from './server.js';

/** A running stand-in. */
export interface StandIn {
  /** A connection string for the official driver. */
  url: string;
  /** `host:port`. */
  address: string;
  /** The replica-set name, or undefined for a standalone server. */
  replicaSet: string | undefined;
  /** The MongoDB version it reports (`8.0` has the multi-collection `bulkWrite` command). */
  serverVersion: StandInVersion;
  /** Commands served since the start (or the last reset), `hello` / `isMaster` excluded: the round trips. */
  commandCount(): number;
  /** The same, by command name. */
  commandCounts(): Record<string, number>;
  resetCommandCount(): void;
  /** Runs one pass of the TTL monitor now (or as if at `now`); returns how many documents it deleted. */
  runTtlMonitor(now?: Date): number;
  /** The server itself, for tests that inspect storage. */
  server: StandInServer;
  /**
   * Takes the server down as a restart would: closes the listener and every
   * open connection and drops open transactions and cursors; committed data
   * stays in memory.
   */
  stop(): Promise<void>;
  /** Brings a stopped server back on the same port, with its data. */
  start(): Promise<void>;
}

/** Starts a stand-in on 127.0.0.1 and a free port (a replica-set primary `rs0` unless told otherwise). */
export async function startStandIn(options: StandInOptions = {}): Promise<StandIn> {
  const server = new StandInServer(options);
  await server.listen();
  const replicaSet = server.replicaSet;
  const url =
    replicaSet === undefined
      ? `mongodb://${server.address}/?directConnection=true`
      : `mongodb://${server.address}/?replicaSet=${encodeURIComponent(replicaSet)}`;
  return {
    url,
    address: server.address,
    replicaSet,
    serverVersion: server.serverVersion,
    commandCount: () => server.commandCount(),
    commandCounts: () => server.commandCounts(),
    resetCommandCount: () => server.resetCommandCount(),
    runTtlMonitor: (now = new Date()) => server.engine.expire(now),
    server,
    stop: () => server.close(),
    start: () => server.listen(),
  };
}
