/**
 * The loopback guard: every outgoing TCP connection and name lookup of a
 * test process goes through here. Loopback targets pass; anything else is
 * refused before a packet leaves and recorded, and the run fails on it.
 */
import dns from 'node:dns';
import net from 'node:net';

/** The only hosts a test may reach. */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', '::1', 'localhost', '::ffff:127.0.0.1']);

export interface GuardRecord {
  /** Connections and lookups that were refused, as `kind host[:port]`. */
  refused: string[];
  /** How many loopback connections went through. */
  loopbackConnections: number;
  installed: boolean;
}

const KEY = Symbol.for('adk-state.loopback-guard');
const holder = globalThis as { [KEY]?: GuardRecord };

export function guardRecord(): GuardRecord {
  holder[KEY] ??= { refused: [], loopbackConnections: 0, installed: false };
  return holder[KEY];
}

export function isLoopback(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return LOOPBACK_HOSTS.has(bare.toLowerCase());
}

interface ConnectTarget {
  host?: string;
  port?: unknown;
  path?: string;
}

/** The target of a `Socket#connect` call in any of its forms (options, path, port and host, or net's normalized array). */
function targetOf(args: unknown[]): ConnectTarget {
  const first = Array.isArray(args[0]) ? (args[0] as unknown[])[0] : args[0];
  if (typeof first === 'object' && first !== null) return first as ConnectTarget;
  if (typeof first === 'string' && !/^\d+$/.test(first)) return { path: first };
  return { port: first, host: typeof args[1] === 'string' ? args[1] : undefined };
}

type Callback = (...args: unknown[]) => void;

/** Installs the guard once per process; returns its record. */
export function installLoopbackGuard(): GuardRecord {
  const record = guardRecord();
  if (record.installed) return record;
  record.installed = true;

  const connect = net.Socket.prototype.connect as (...args: unknown[]) => net.Socket;
  net.Socket.prototype.connect = function guardedConnect(this: net.Socket, ...args: unknown[]): net.Socket {
    const target = targetOf(args);
    if (target.path !== undefined) return connect.apply(this, args);
    const host = target.host ?? 'localhost';
    if (isLoopback(host)) {
      record.loopbackConnections++;
      return connect.apply(this, args);
    }
    record.refused.push(`connect ${host}:${String(target.port)}`);
    process.nextTick(() => this.destroy(new Error(`loopback guard: refused a connection to ${host}`)));
    return this;
  } as typeof net.Socket.prototype.connect;

  const lookup = dns.lookup as (...args: unknown[]) => void;
  const guardedLookup = (hostname: string, ...rest: unknown[]) => {
    if (isLoopback(hostname)) return lookup(hostname, ...rest);
    record.refused.push(`lookup ${hostname}`);
    const callback = rest[rest.length - 1] as Callback;
    const error = Object.assign(new Error(`loopback guard: refused to look up ${hostname}`), { code: 'ENOTFOUND' });
    process.nextTick(() => callback(error));
  };
  (dns as { lookup: unknown }).lookup = guardedLookup;

  const promiseLookup = dns.promises.lookup;
  (dns.promises as { lookup: unknown }).lookup = (hostname: string, ...rest: unknown[]) => {
    if (isLoopback(hostname)) return (promiseLookup as (...args: unknown[]) => Promise<unknown>)(hostname, ...rest);
    record.refused.push(`lookup ${hostname}`);
    return Promise.reject(
      Object.assign(new Error(`loopback guard: refused to look up ${hostname}`), { code: 'ENOTFOUND' }),
    );
  };

  // Resolvers query name servers directly: no test has a reason to.
  for (const method of ['resolve', 'resolve4', 'resolve6', 'resolveAny', 'resolveSrv', 'resolveTxt'] as const) {
    const refuse = (hostname: string, ...rest: unknown[]) => {
      record.refused.push(`${method} ${hostname}`);
      const callback = rest[rest.length - 1] as Callback;
      process.nextTick(() => callback(new Error(`loopback guard: refused ${method} ${hostname}`)));
    };
    (dns as unknown as Record<string, unknown>)[method] = refuse;
    (dns.Resolver.prototype as unknown as Record<string, unknown>)[method] = refuse;
    const refusePromise = (hostname: string) => {
      record.refused.push(`${method} ${hostname}`);
      return Promise.reject(new Error(`loopback guard: refused ${method} ${hostname}`));
    };
    (dns.promises as unknown as Record<string, unknown>)[method] = refusePromise;
    (dns.promises.Resolver.prototype as unknown as Record<string, unknown>)[method] = refusePromise;
  }
  return record;
}
