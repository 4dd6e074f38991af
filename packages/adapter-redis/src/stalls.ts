/**
 * Replacing a connection of the service's own client that has stopped
 * answering. ioredis matches replies to commands by their order on the
 * connection and never gives up on a command it has written: on a connection
 * that went silent (the server's host vanished, a half-open TCP connection,
 * a middlebox that lost a reply), every later command of the store waits
 * behind the first unanswered one until the kernel drops the connection
 * (about 15 minutes of retransmissions on Linux), and each call fails at its
 * deadline, although a new connection would work at once.
 *
 * A watch checks, a few times per bound, which command heads each
 * connection's queue of commands awaiting a reply. A head unchanged for the
 * whole bound, with no byte read meanwhile (no reply, nor part of one,
 * arrived in that time), marks the connection as stalled: it is destroyed and
 * the client reconnects as after any lost connection. Its waiting commands
 * fail, as writes that may have been applied since they were written; a
 * Cluster sends them again on the node's new connection instead, and a write
 * script that ran already finds its own write (see the scripts). Nothing is
 * done per command, so the hot path pays nothing; the price is a timer per
 * client and a look at ioredis's internal queue (`commandQueue`, `stream`; the
 * same in every ioredis 5.x and 6.x), read only, and skipped where absent.
 *
 * Only for a client the service made: a client passed in is the
 * application's, and ioredis's own `socketTimeout` option (5.4 and later)
 * does the same for it, at a cost per command.
 */
import type { Cluster, Redis } from 'ioredis';

/** How many checks one bound spans: a stall is found between `afterMs` and `afterMs` plus a quarter of it. */
const CHECKS = 4;

/**
 * Added to the longest wait a call has, so that a reply due right at that
 * bound is not cut off (Redis answers a `WAIT` up to tens of milliseconds
 * after its timeout).
 */
export const STALL_GRACE_MS = 1_000;

/** The fewest milliseconds between two checks. */
const MIN_PERIOD_MS = 25;

/** What the watch reads of one ioredis connection; every part may be absent. */
interface Watched {
  readonly status?: string;
  readonly commandQueue?: { readonly length: number; peekFront?(): unknown };
  readonly stream?: { destroy(error?: Error): void; readonly bytesRead?: number };
}

/** The error a stalled connection is destroyed with (the client reports it, and the failed calls name it). */
export class ConnectionStalled extends Error {
  constructor(afterMs: number) {
    super(`a command had no reply for ${afterMs} ms, so the connection was dropped and made again`);
    this.name = 'ConnectionStalled';
  }
}

/** The connections of `client` as the watch reads them: the client itself, or each node's of a cluster. */
export function connectionsOf(client: Redis | Cluster): readonly object[] {
  return client.isCluster ? (client as Cluster).nodes('all') : [client];
}

/**
 * Destroys the sockets of `connections` (taken with {@link connectionsOf}
 * before `disconnect()`, which forgets a cluster's nodes), for a `close()`:
 * on a silent connection, the socket's polite end waits for an answer that
 * never comes, and the client would not end.
 */
export function destroySockets(connections: readonly object[]): void {
  for (const connection of connections) (connection as Watched).stream?.destroy();
}

/**
 * Starts watching the connections of `client` (one, or one per node of a
 * cluster) for a command without a reply for `afterMs`; returns the function
 * that stops the watch. An infinite `afterMs` watches nothing.
 */
export function watchStalls(client: Redis | Cluster, afterMs: number): () => void {
  if (!Number.isFinite(afterMs)) return () => {};
  const period = Math.max(MIN_PERIOD_MS, Math.ceil(afterMs / CHECKS));
  /** Per connection: the head last seen, at how many checks in a row, and the bytes read by then. */
  const seen = new WeakMap<object, { head: unknown; checks: number; bytes: number | undefined }>();
  const check = (connection: Watched) => {
    const queue = connection.commandQueue;
    const head = connection.status === 'ready' && queue && queue.length > 0 ? queue.peekFront?.() : undefined;
    const last = seen.get(connection);
    if (head === undefined) {
      if (last) seen.delete(connection);
      return;
    }
    // A reply still arriving (a large read) is progress: the bytes read count too.
    const bytes = connection.stream?.bytesRead;
    if (last === undefined || last.head !== head || last.bytes !== bytes) {
      seen.set(connection, { head, checks: 1, bytes });
      return;
    }
    // Seen first at check 1, the head has waited at least (checks - 1) periods.
    if (++last.checks <= CHECKS) return;
    seen.delete(connection);
    connection.stream?.destroy(new ConnectionStalled(afterMs));
  };
  const timer = setInterval(() => {
    for (const connection of connectionsOf(client)) check(connection as Watched);
  }, period);
  timer.unref();
  return () => clearInterval(timer);
}
