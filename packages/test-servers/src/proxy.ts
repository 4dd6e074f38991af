/**
 * `@adk-state/test-servers/proxy`: a TCP proxy on 127.0.0.1 between a client
 * and one server, that a test can make hold back what a client sends from a
 * chosen command on (a Redis script's SHA, say), pause, or cut; and one such
 * proxy per node of a Redis Cluster, with the `natMap` that routes an ioredis
 * Cluster through them.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

const HOST = '127.0.0.1';
/** How many bytes already forwarded each connection keeps, to find a match that spans two chunks. */
const LOOKBEHIND = 4_096;

/**
 * What {@link TcpProxy.hold} looks for in what a client sends. A string or
 * bytes: found anywhere in the stream, also across chunks (of up to 4096
 * bytes before the chunk it completes in); the proxy forwards what comes
 * before the match and holds the match and everything after it. A function:
 * called with each chunk as it is about to be forwarded, returns `true` to
 * hold the whole chunk (and what follows), an offset into the chunk to hold
 * from there, or `false` / a negative number to let it pass.
 */
export type HoldMatch = string | Uint8Array | ((chunk: Buffer) => boolean | number);

/** Options of {@link startProxy}. */
export interface ProxyOptions {
  /** Where connections go: a port on 127.0.0.1, or a host and port. */
  target: number | { host?: string; port: number };
  /** The port to listen on (default: a free one). */
  port?: number;
}

/** What a proxy has seen since it started. */
export interface ProxyStats {
  /** Connections accepted. */
  accepted: number;
  /** Bytes received from clients, and forwarded to the server. */
  bytesFromClients: number;
  bytesToServer: number;
  /** Bytes received from the server, and forwarded to clients. */
  bytesFromServer: number;
  bytesToClients: number;
}

/** A running proxy started by {@link startProxy}. */
export interface TcpProxy {
  /** `127.0.0.1` */
  readonly host: string;
  readonly port: number;
  /** `127.0.0.1:<port>` */
  readonly address: string;
  readonly target: { host: string; port: number };
  /**
   * From now until {@link release}, a connection whose client sends `match`
   * forwards what precedes the match and holds the rest of what its client
   * sends (the match included) until `release()`. Other connections and the
   * server's answers keep flowing. A new `hold` replaces the previous match
   * (connections already holding keep holding).
   */
  hold(match: HoldMatch): void;
  /** Forwards everything held, in order, and stops matching. */
  release(): void;
  /** How many connections are holding right now. */
  readonly holding: number;
  /** Resolves once some connection holds (at once if one does); rejects after `timeoutMs` (default 10 s). */
  untilHeld(timeoutMs?: number): Promise<void>;
  /** Forwards nothing in either direction until {@link resume} (what arrives is kept, in order). */
  pause(): void;
  /** Forwards what {@link pause} kept, and goes on forwarding. */
  resume(): void;
  readonly paused: boolean;
  /** Destroys every open connection, on both sides (what is held or kept is discarded); new ones are accepted. */
  drop(): void;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
  /** Connections open right now. */
  readonly connections: number;
  /** Connections accepted since the start, and bytes received and forwarded each way. */
  readonly stats: ProxyStats;
}

/** One direction of one connection: bytes waiting to be written to `to`. */
interface Direction {
  to: Socket;
  pending: Buffer[];
  /** The source has ended: end `to` once `pending` is written. */
  ended: boolean;
}

interface Connection {
  client: Socket;
  server: Socket;
  up: Direction;
  down: Direction;
  /** The tail of what was forwarded to the server (for matches across chunks). */
  tail: Buffer;
  held: boolean;
}

/** Where `match` begins relative to the start of `chunk` (negative: in `tail`), or undefined if absent. */
function findMatch(match: HoldMatch, tail: Buffer, chunk: Buffer): number | undefined {
  if (typeof match === 'function') {
    const result = match(chunk);
    if (result === true) return 0;
    if (result === false || result < 0) return undefined;
    return Math.min(result, chunk.length);
  }
  const needle = typeof match === 'string' ? Buffer.from(match) : Buffer.from(match);
  if (needle.length === 0) return 0;
  const before = tail.subarray(Math.max(0, tail.length - (needle.length - 1)));
  const index = Buffer.concat([before, chunk]).indexOf(needle);
  return index < 0 ? undefined : index - before.length;
}

/** Starts a proxy on 127.0.0.1 to `options.target`; resolves once it listens. */
export async function startProxy(options: ProxyOptions): Promise<TcpProxy> {
  const target =
    typeof options.target === 'number'
      ? { host: HOST, port: options.target }
      : { host: options.target.host ?? HOST, port: options.target.port };
  const connections = new Set<Connection>();
  const stats: ProxyStats = {
    accepted: 0,
    bytesFromClients: 0,
    bytesToServer: 0,
    bytesFromServer: 0,
    bytesToClients: 0,
  };
  let match: HoldMatch | undefined;
  let paused = false;
  let waiters: Array<() => void> = [];

  const holdingCount = () => [...connections].filter((connection) => connection.held).length;

  const destroy = (connection: Connection) => {
    connections.delete(connection);
    connection.client.destroy();
    connection.server.destroy();
  };

  /** Writes what may be written now. */
  const pump = (connection: Connection) => {
    if (!connections.has(connection) || paused) return;
    const { up, down } = connection;
    while (down.pending.length > 0) {
      const chunk = down.pending.shift() as Buffer;
      stats.bytesToClients += chunk.length;
      down.to.write(chunk);
    }
    if (down.ended && !down.to.writableEnded) down.to.end();
    while (!connection.held && up.pending.length > 0) {
      const chunk = up.pending.shift() as Buffer;
      const at = match === undefined ? undefined : findMatch(match, connection.tail, chunk);
      let forward = chunk;
      if (at !== undefined) {
        const from = Math.max(0, at);
        forward = chunk.subarray(0, from);
        if (from < chunk.length) up.pending.unshift(chunk.subarray(from));
        connection.held = true;
      }
      if (forward.length > 0) {
        stats.bytesToServer += forward.length;
        up.to.write(forward);
        connection.tail = Buffer.concat([connection.tail, forward]);
        if (connection.tail.length > LOOKBEHIND) connection.tail = connection.tail.subarray(-LOOKBEHIND);
      }
    }
    if (connection.held) {
      const ready = waiters;
      waiters = [];
      for (const wake of ready) wake();
    } else if (up.ended && up.pending.length === 0 && !up.to.writableEnded) up.to.end();
  };

  // Half-open: each side's end is passed on once what it sent before is forwarded.
  const listener: Server = createServer({ allowHalfOpen: true }, (client) => {
    stats.accepted++;
    const server = tcpConnect({ host: target.host, port: target.port, allowHalfOpen: true });
    const connection: Connection = {
      client,
      server,
      up: { to: server, pending: [], ended: false },
      down: { to: client, pending: [], ended: false },
      tail: Buffer.alloc(0),
      held: false,
    };
    connections.add(connection);
    client.on('data', (chunk: Buffer) => {
      stats.bytesFromClients += chunk.length;
      connection.up.pending.push(chunk);
      pump(connection);
    });
    server.on('data', (chunk: Buffer) => {
      stats.bytesFromServer += chunk.length;
      connection.down.pending.push(chunk);
      pump(connection);
    });
    client.on('end', () => {
      connection.up.ended = true;
      pump(connection);
    });
    server.on('end', () => {
      connection.down.ended = true;
      pump(connection);
    });
    for (const socket of [client, server]) {
      socket.on('error', () => destroy(connection));
      socket.on('close', () => {
        // Closed before both sides said they were done (destroyed, reset): cut the other side too.
        if (!(connection.up.ended && connection.down.ended)) destroy(connection);
        else if (client.destroyed && server.destroyed) connections.delete(connection);
      });
    }
  });

  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(options.port ?? 0, HOST, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  const address = listener.address();
  if (typeof address !== 'object' || !address) throw new Error('the proxy has no address');
  const port = address.port;

  return {
    host: HOST,
    port,
    address: `${HOST}:${port}`,
    target,
    hold(next) {
      match = next;
      for (const connection of connections) pump(connection);
    },
    release() {
      match = undefined;
      for (const connection of connections) {
        connection.held = false;
        pump(connection);
      }
    },
    get holding() {
      return holdingCount();
    },
    untilHeld(timeoutMs = 10_000) {
      if (holdingCount() > 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((waiter) => waiter !== wake);
          reject(new Error(`no connection through ${HOST}:${port} sent the held match within ${timeoutMs} ms`));
        }, timeoutMs);
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        waiters.push(wake);
      });
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      for (const connection of connections) pump(connection);
    },
    get paused() {
      return paused;
    },
    drop() {
      for (const connection of [...connections]) destroy(connection);
    },
    async close() {
      const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
      for (const connection of [...connections]) destroy(connection);
      await closed;
    },
    get connections() {
      return connections.size;
    },
    get stats() {
      return { ...stats };
    },
  };
}

/** One proxy per node of a Redis Cluster, from {@link startClusterProxies}. */
export interface ClusterProxies {
  /** The proxies, in the order of the nodes given. */
  proxies: TcpProxy[];
  /** The proxy of the node on 127.0.0.1:`port` (the node's real port). */
  proxyFor(port: number): TcpProxy;
  /**
   * The ioredis `natMap`: each node's real `127.0.0.1:<port>`, as `CLUSTER SLOTS`
   * and `MOVED` name it, to its proxy's address.
   */
  natMap: Record<string, { host: string; port: number }>;
  /** The proxies' addresses, as the startup nodes of an ioredis Cluster. */
  startupNodes: Array<{ host: string; port: number }>;
  /** Releases every proxy's hold. */
  release(): void;
  /** Closes every proxy. */
  close(): Promise<void>;
}

/**
 * Starts one proxy per cluster node (on 127.0.0.1). An ioredis Cluster then
 * goes through them with `new Cluster(proxies.startupNodes, { natMap: proxies.natMap })`.
 * The cluster bus and replication between the nodes do not go through them.
 */
export async function startClusterProxies(nodes: Array<{ host?: string; port: number }>): Promise<ClusterProxies> {
  const proxies: TcpProxy[] = [];
  try {
    for (const node of nodes) proxies.push(await startProxy({ target: { host: node.host ?? HOST, port: node.port } }));
  } catch (error) {
    await Promise.all(proxies.map((proxy) => proxy.close()));
    throw error;
  }
  const natMap: Record<string, { host: string; port: number }> = {};
  for (const proxy of proxies) natMap[`${proxy.target.host}:${proxy.target.port}`] = { host: HOST, port: proxy.port };
  return {
    proxies,
    proxyFor(port) {
      const proxy = proxies.find((candidate) => candidate.target.port === port);
      if (!proxy) throw new Error(`no proxy for port ${port}`);
      return proxy;
    },
    natMap,
    startupNodes: proxies.map((proxy) => ({ host: HOST, port: proxy.port })),
    release() {
      for (const proxy of proxies) proxy.release();
    },
    async close() {
      await Promise.all(proxies.map((proxy) => proxy.close()));
    },
  };
}
