/**
 * Sending one command for one store call: under the call's deadline, with a
 * failure reported honestly. A write is "not applied" only when the command
 * certainly never left the client:
 *
 * - the call was abandoned, or the client had ended, before it was handed over;
 * - it waited in ioredis's offline queue (the client was not `ready` when it
 *   was handed over) and was rejected before the client became `ready` again
 *   (ioredis writes its offline queue only once the connection is ready).
 *   Cluster clients route through per-node connections and retry on other
 *   nodes, so there the client's own state proves nothing and only the first
 *   rule applies.
 *
 * Anything else (a reply error aside, which is the server's answer) may have
 * reached the server: a command written on a connection that then died, or one
 * still queued when the call was abandoned (ioredis has no way to withdraw it,
 * so it may be sent once the connection is back).
 */
import { BackendError } from '@adk-state/core';
import { callAbandoned, isUnreadableData, type StoreCall } from '@adk-state/core/store';
import type { Redis } from 'ioredis';
import * as ioredis from 'ioredis';

/** The subset of an ioredis `Redis` or `Cluster` client (5.x or 6.x) that the store uses. */
export interface CommandClient {
  call(command: string, args: Array<string | number>): Promise<unknown>;
  /** `wait`, `connecting`, `connect`, `ready`, `reconnecting`, `close`, `end`, … */
  readonly status?: string;
  /** True for a `Cluster`. */
  readonly isCluster?: boolean;
  /** The client's options (ioredis's `options.db` is the database it selects on every connect). */
  readonly options?: { db?: unknown };
  /** A `Cluster`'s refresh of its map of slots to nodes. */
  refreshSlotsCache?(callback?: (error?: Error | null) => void): void;
  /** Commands sent together, on one connection (on a `Cluster`, to the node of their keys). */
  pipeline?(commands: Array<Array<string | number>>): { exec(): Promise<Array<[Error | null, unknown]> | null> };
  on?(event: string, listener: (...args: unknown[]) => void): unknown;
  off?(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** Writes wait for this many replicas to acknowledge them (Redis `WAIT`), for at most `timeoutMs`. */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}

/** A write was applied on the master, but too few replicas acknowledged it in time: a failover may lose it. */
export class TooFewReplicas extends Error {
  constructor(wait: ReplicaWait, acknowledged: number | undefined, cause?: unknown) {
    super(
      acknowledged === undefined
        ? `the write was sent, but waiting for ${wait.replicas} replica(s) to acknowledge it failed`
        : `the write was applied on the master, but only ${acknowledged} of ${wait.replicas} replica(s) acknowledged it within ${wait.timeoutMs} ms (a failover now could lose it)`,
      { cause },
    );
    this.name = 'TooFewReplicas';
  }
}

/** What {@link Connection} knows of one store step, for its errors. */
export interface Step {
  /** The store method, named in errors (`createSession`, `appendEvent`, …). */
  operation: string;
  /** Whether the step writes (so a failure may leave the write applied). */
  write: boolean;
  call: StoreCall | undefined;
}

/** The call passed its deadline while its command was out; the store stops waiting for it. */
export class CommandAbandoned extends Error {
  constructor() {
    super('no answer before the call passed its deadline (timeoutMs); the command may still run');
    this.name = 'CommandAbandoned';
  }
}

/**
 * Counts a client's `ready` events while at least one command waits in its
 * offline queue: one listener per client, however many stores share it, and
 * none once nothing waits.
 */
class ReadyCounter {
  count = 0;
  #holders = 0;
  readonly #client: CommandClient;
  readonly #listener = () => {
    this.count++;
  };

  constructor(client: CommandClient) {
    this.#client = client;
  }

  hold(): void {
    if (this.#holders++ === 0) this.#client.on?.('ready', this.#listener);
  }

  release(): void {
    if (--this.#holders === 0) this.#client.off?.('ready', this.#listener);
  }
}

const counters = new WeakMap<CommandClient, ReadyCounter>();

/**
 * The Redis class. At run time `default` is the class in every ioredis 5.x and
 * 6.x, from ESM and CommonJS alike (the named export `Redis` came later); the
 * typings describe `default` of a CommonJS module as the whole module, hence the cast.
 */
export const RedisClass = (ioredis as unknown as { default: typeof Redis }).default;

/**
 * A cheaper way to send a command through a plain ioredis `Redis` client
 * than its `call`: the `Command` is built with no arguments and given our
 * list of strings afterwards, then handed to `sendCommand`. `call` copies the
 * argument list with `Array.prototype.flat` in the `Command` constructor, at
 * about 80 ns per argument, and a write carries 30 or more.
 *
 * Only for a client of the ioredis this package loads (so that the `Command`
 * is the client's own), whose `call` and `sendCommand` are its class's (not a
 * wrapper), and with none of the options that make `call` do more: a key prefix (added
 * to the keys by the constructor), auto-pipelining, friendly error stacks.
 * Anything else, a `Cluster` included, goes through `call`.
 */
function directSender(
  client: CommandClient,
): ((command: string, args: Array<string | number>) => Promise<unknown>) | undefined {
  if (!(client instanceof RedisClass)) return undefined;
  const options = client.options;
  if (options.keyPrefix || options.enableAutoPipelining || options.showFriendlyErrorStack) return undefined;
  const ownClass = RedisClass.prototype;
  if (client.call !== ownClass.call || client.sendCommand !== ownClass.sendCommand) return undefined;
  const Command = RedisClass.Command;
  return (name, args) => {
    const command = new Command(name, [], { replyEncoding: 'utf8' });
    const text: string[] = new Array(args.length);
    for (let at = 0; at < args.length; at++) {
      const arg = args[at];
      text[at] = typeof arg === 'string' ? arg : String(arg);
    }
    command.args = text;
    return client.sendCommand(command) as Promise<unknown>;
  };
}

function readyCounter(client: CommandClient): ReadyCounter {
  let counter = counters.get(client);
  if (!counter) {
    counter = new ReadyCounter(client);
    counters.set(client, counter);
  }
  return counter;
}

/**
 * What a server's refusal says about the store's configuration:
 * `authentication` for a password or user it refuses (`WRONGPASS`, `NOAUTH`,
 * `NOPERM`, or an older server's `invalid password`), `unknown-database` for
 * a database index it does not have; `undefined` for anything else.
 */
export function refusalKind(error: unknown): 'authentication' | 'unknown-database' | undefined {
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  if (/^(WRONGPASS|NOAUTH|NOPERM)\b|^ERR invalid password|^ERR AUTH .*without any password configured/i.test(message)) {
    return 'authentication';
  }
  if (/DB index is out of range|^ERR invalid DB index/i.test(message)) return 'unknown-database';
  return undefined;
}

/** ioredis's words when it gives up on a command after reconnecting: an option the caller may never have set. */
const RETRY_LIMIT =
  /Reached the max retries per request limit \(which is \d+\)\. Refer to "maxRetriesPerRequest" option for details\./;

function plainFailure(error: unknown): unknown {
  if (!(error instanceof Error) || !RETRY_LIMIT.test(error.message)) return error;
  return new Error(
    error.message.replace(RETRY_LIMIT, 'the connection to the server failed, and the client gave up on the command'),
    { cause: error },
  );
}

export class Connection {
  readonly #client: CommandClient;
  /** Sends one command: {@link directSender}'s way where it applies, else through the client's `call`. */
  readonly #call: (command: string, args: Array<string | number>) => Promise<unknown>;
  readonly #ready: ReadyCounter;
  /** The last connection error of our own client, since it was last ready. */
  #lastError: Error | undefined;
  /**
   * The server refused our own client's configuration when it connected (a
   * database index it does not have): every later command is refused, since
   * ioredis would send it to database 0.
   */
  #refused: Error | undefined;
  /**
   * For our own client with a database index other than 0: the first
   * command waits for an explicit `SELECT` of it, because ioredis sends
   * commands on in database 0 when its own `SELECT` on connect is refused.
   */
  #database: Promise<void> | undefined;

  /**
   * @param own True for a client the service created: it gets lasting
   *   `error` and `ready` listeners (ioredis prints "Unhandled error event"
   *   without an error listener). A client the caller passed in gets no
   *   lasting listener: only a `ready` listener while a command waits in its
   *   offline queue.
   */
  constructor(client: CommandClient, own: boolean) {
    this.#client = client;
    this.#call = directSender(client) ?? ((command, args) => client.call(command, args));
    this.#ready = readyCounter(client);
    if (own) {
      const db = client.options?.db;
      if (typeof db === 'number' && db !== 0 && client.isCluster !== true) {
        this.#database = client.call('select', [db]).then(
          () => {
            this.#database = undefined;
          },
          (error: unknown) => {
            // Only the server's "no such database" is kept; any other failure shows on the command itself.
            if (refusalKind(error) === 'unknown-database') this.#refused = error as Error;
            else this.#database = undefined;
          },
        );
      }
      client.on?.('error', (error: unknown) => {
        if (error instanceof Error) this.#lastError = error;
        if (refusalKind(error) === 'unknown-database') this.#refused = error as Error;
      });
      client.on?.('ready', () => {
        this.#lastError = undefined;
      });
    }
  }

  /**
   * Sends one command and waits for its answer, or until the call is
   * abandoned. A failure is a {@link BackendError} that says whether the
   * command may have reached the server; a reply error of the server (a
   * script error) is passed on as it is.
   */
  async send(step: Step, command: string, args: Array<string | number>, wait?: ReplicaWait): Promise<unknown> {
    const { call } = step;
    if (callAbandoned(call)) {
      throw new BackendError(step.operation, new CommandAbandoned(), { mayHaveApplied: false, timedOut: true });
    }
    if (this.#database) await untilAbandoned(this.#database, call).catch(() => {});
    if (this.#refused) {
      throw new BackendError(step.operation, this.#refused, { kind: 'unknown-database' });
    }
    if (callAbandoned(call)) {
      throw new BackendError(step.operation, new CommandAbandoned(), { mayHaveApplied: false, timedOut: true });
    }
    if (this.#client.status === 'end') {
      throw new BackendError(step.operation, new Error('Connection is closed (the client has ended)'), {
        mayHaveApplied: false,
      });
    }
    // Not ready: ioredis puts the command in its offline queue, and writes it once the client is ready.
    const queued = this.#client.status !== 'ready' && this.#client.isCluster !== true;
    if (queued) this.#ready.hold();
    const readyBefore = this.#ready.count;
    let reply: Promise<unknown>;
    try {
      reply = wait ? this.#callWaited(command, args, wait) : this.#call(command, args);
    } catch (error) {
      if (queued) this.#ready.release();
      throw this.#failure(step, error, queued);
    }
    try {
      const answer = await untilAbandoned(reply, call);
      if (call?.usage) call.usage.roundTrips++;
      return answer;
    } catch (error) {
      if (error instanceof CommandAbandoned) {
        throw new BackendError(step.operation, error, { mayHaveApplied: step.write, timedOut: true });
      }
      if (isReplyError(error)) {
        if (call?.usage) call.usage.roundTrips++;
        const kind = refusalKind(error);
        if (kind) throw new BackendError(step.operation, error, { kind });
        // A key of another type than the scripts keep (written outside adk-state) where a command
        // went: a write's own check answers before writing (scripts.ts, FOREIGNTYPE); elsewhere a
        // write may have written before the command that failed.
        if (error instanceof Error && error.message.startsWith('WRONGTYPE')) {
          throw new BackendError(step.operation, error, { kind: 'unreadable-data', mayHaveApplied: step.write });
        }
        // A node that is a replica now (a failover demoted it): it wrote nothing (a replica refuses
        // every write, and a script cannot see its node change role). A Cluster client learns the
        // new map of slots on a redirection or its periodic refresh, seconds later: refresh it now.
        if (error instanceof Error && error.message.startsWith('READONLY')) {
          this.#refreshSlots();
          throw new BackendError(step.operation, error, { mayHaveApplied: false });
        }
        throw error;
      }
      throw this.#failure(step, error, queued && this.#ready.count === readyBefore);
    } finally {
      if (queued) this.#ready.release();
    }
  }

  /** Asks a `Cluster` client to refresh its map of slots (it runs one refresh at a time). */
  #refreshSlots(): void {
    if (this.#client.isCluster !== true || typeof this.#client.refreshSlotsCache !== 'function') return;
    try {
      this.#client.refreshSlotsCache(() => {});
    } catch {
      // The next redirection or periodic refresh does it.
    }
  }

  /**
   * The command, then WAIT on the same connection: its reply once at least
   * `wait.replicas` replicas have acknowledged it (and every earlier write of
   * that connection), else a {@link TooFewReplicas} failure.
   */
  async #callWaited(command: string, args: Array<string | number>, wait: ReplicaWait): Promise<unknown> {
    const pipeline = this.#client.pipeline;
    if (pipeline === undefined)
      throw new Error('waitForReplicas needs a client with pipeline() (an ioredis Redis or Cluster)');
    const replies = await pipeline
      .call(this.#client, [
        [command, ...args],
        ['wait', wait.replicas, wait.timeoutMs],
      ])
      .exec();
    if (replies === null) throw new Error('the pipeline was discarded');
    const [[commandError, reply] = [null, undefined], [waitError, acknowledged] = [null, 0]] = replies;
    if (commandError) throw commandError;
    if (waitError) throw new TooFewReplicas(wait, undefined, waitError);
    if (Number(acknowledged) < wait.replicas) throw new TooFewReplicas(wait, Number(acknowledged));
    return reply;
  }

  /** A client-side failure as a BackendError, with the last connection error of our own client. */
  #failure(step: Step, error: unknown, neverSent: boolean): BackendError {
    let cause = plainFailure(error);
    const last = this.#lastError;
    if (last && cause instanceof Error && !cause.message.includes(last.message)) {
      cause = new Error(`${cause.message} (last connection error: ${last.message})`, { cause: error });
    }
    const kind = refusalKind(error) ?? refusalKind(last);
    if (kind) return new BackendError(step.operation, cause, { kind });
    return new BackendError(step.operation, cause, { mayHaveApplied: step.write && !neverSent });
  }
}

/**
 * `reply`, or a {@link CommandAbandoned} rejection as soon as the call's
 * signal aborts. The service's calls are not raced: the service stops
 * waiting at the deadline itself, and the signal would cost an
 * `AbortController` per call.
 */
function untilAbandoned<T>(reply: Promise<T>, call: StoreCall | undefined): Promise<T> {
  if (call === undefined || call.bounded === true || call.deadline === Number.POSITIVE_INFINITY) return reply;
  const signal = call.signal;
  return new Promise<T>((resolve, reject) => {
    const abandon = () => reject(new CommandAbandoned());
    signal.addEventListener('abort', abandon, { once: true });
    // Both outcomes are handled here, so a late rejection is never unhandled.
    reply.then(
      (value) => {
        signal.removeEventListener('abort', abandon);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', abandon);
        reject(error);
      },
    );
  });
}

/**
 * The steps of a call that follow a write which may have been applied (the
 * outbox's app read and apply after a create, an append or an import): a
 * failure of theirs fails the call saying the write may have been applied. A
 * step's own "nothing was written" (it was never sent, or it only reads)
 * speaks of that step alone. `steps` is called inside, so that what it
 * throws at once (a reply it cannot read) is caught too. A refusal of the
 * store's configuration by then (its credentials, its database) becomes an
 * outage that may have applied: a `BackendError` of kind `authentication`
 * or `unknown-database` always says nothing was written, which the write
 * before it makes untrue; its message keeps the server's words.
 */
export async function afterWrite<T>(operation: string, steps: () => Promise<T>): Promise<T> {
  try {
    return await steps();
  } catch (error) {
    if (error instanceof BackendError) {
      if (error.mayHaveApplied) throw error;
      const kind = error.kind === 'unreadable-data' ? 'unreadable-data' : 'outage';
      throw new BackendError(operation, error.cause ?? error, {
        kind,
        mayHaveApplied: true,
        timedOut: error.timedOut,
      });
    }
    if (isUnreadableData(error)) {
      throw new BackendError(operation, error, { kind: 'unreadable-data', mayHaveApplied: true });
    }
    // Anything else is passed on as it is, which the service reports as a write that may have been applied.
    throw error;
  }
}

/** An error reply of the server (ioredis's `ReplyError`): the command ran there, and said no. */
export function isReplyError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}
