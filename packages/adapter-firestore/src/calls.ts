/**
 * The deadline of a store call, carried to every RPC the Firestore client
 * sends for it.
 *
 * `@google-cloud/firestore` takes no per-call timeout in its public API
 * (`get()`, `getAll()`, `runTransaction()`), but every RPC it sends gets its
 * call options from one method of the client instance, `createCallOptions`.
 * {@link attachDeadlines} wraps that method once per instance: inside a store
 * call ({@link withCall}, an `AsyncLocalStorage` scope), the options get the
 * time left as their gRPC `timeout`, so an RPC (and the client's retries of
 * it) stops when the call's deadline passes instead of after the client's
 * own 60 s to 10 min. Outside a store call the options are untouched, so the
 * rest of the application never sees a difference; a client without that
 * method (a future major) keeps its own timeouts, and the service's deadline
 * still bounds every call.
 *
 * A transaction's reads get {@link TRANSACTION_GRACE_MS} past the deadline
 * (see {@link withTransactionGrace}), and its rollback {@link ROLLBACK_MS} of
 * its own: they begin and end the transaction's locks, and should finish even
 * after the call has given up.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { callAbandoned, type StoreCall, settledWithin } from '@adk-state/core/store';

const scope = new AsyncLocalStorage<StoreCall>();
const attached = new WeakSet<object>();

type CreateCallOptions = (this: unknown, methodName: string, ...rest: unknown[]) => unknown;

interface BackoffSettings {
  initialRpcTimeoutMillis?: number | null;
  maxRpcTimeoutMillis?: number | null;
  totalTimeoutMillis?: number | null;
}

/** google-gax's retries of a streaming RPC within one attempt (its `retry-request` options), for a store call. */
const NO_STREAM_RETRIES = Object.freeze({ retries: 0, noResponseRetries: 0 });

/**
 * How long a rollback may take, the client's retries of it included, from
 * when it is sent, whatever the call's deadline. It releases the locks of a
 * transaction the call abandoned, so it outlives the call; but the client's
 * own bound is a minute of retries against a backend that is gone (and the
 * 7.x client rolls back even a transaction that never began), while the
 * server ends an idle transaction by itself.
 */
export const ROLLBACK_MS = 10_000;

/** Wraps `firestore.createCallOptions` once; false when the client has no such method. */
export function attachDeadlines(firestore: object): boolean {
  if (attached.has(firestore)) return true;
  const client = firestore as { createCallOptions?: CreateCallOptions };
  const original = client.createCallOptions;
  if (typeof original !== 'function') return false;
  const bounded: CreateCallOptions = function createCallOptions(this: unknown, methodName, ...rest) {
    const options = original.call(this, methodName, ...rest);
    const call = scope.getStore();
    // Made once per RPC (its retries reuse the options): one request of the call, for its span.
    if (call?.usage) call.usage.roundTrips++;
    if (!call || typeof options !== 'object' || options === null) return options;
    const rollback = methodName === 'rollback';
    const deadline = rollback ? Date.now() + ROLLBACK_MS : call.deadline;
    const bound = options as {
      timeout?: number;
      retry?: { backoffSettings?: BackoffSettings };
      retryRequestOptions?: object;
    };
    if (!rollback && bound.retry === undefined && !('retryRequestOptions' in bound)) {
      // google-gax retries a failed stream within each attempt of a streaming read (two more times,
      // 2 s and 4 s apart, whatever the timeout), and the client then retries the read itself (up to
      // five attempts, 1 s apart and growing): a read abandoned against a refused port kept the
      // client busy for 45 s. The inner retries are left out; the client's own remain.
      bound.retryRequestOptions = NO_STREAM_RETRIES;
    }
    if (!Number.isFinite(deadline)) return options;
    const timeLeft = () => Math.max(1, Math.ceil(deadline - Date.now()));
    const left = timeLeft();
    // Read by the client at each attempt (it retries with the same options): the time left then.
    Object.defineProperty(bound, 'timeout', { get: timeLeft, enumerable: true, configurable: true });
    const retry = bound.retry;
    if (retry && typeof retry === 'object' && retry.backoffSettings) {
      // A copy: the client builds these settings from shared defaults.
      const settings = { ...retry.backoffSettings };
      for (const name of ['initialRpcTimeoutMillis', 'maxRpcTimeoutMillis', 'totalTimeoutMillis'] as const) {
        const value = settings[name];
        settings[name] = typeof value === 'number' ? Math.min(value, left) : left;
      }
      bound.retry = Object.assign(Object.create(Object.getPrototypeOf(retry) as object) as object, retry, {
        backoffSettings: settings,
      });
    }
    return options;
  };
  Object.defineProperty(firestore, 'createCallOptions', {
    value: bounded,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  attached.add(firestore);
  return true;
}

const guardedPools = new WeakSet<object>();
/** The client's inner (gapic) clients known set up: their RPCs go straight on. */
const readyClients = new WeakSet<object>();

/**
 * The client could not set up its connection for the store's request, its
 * credentials most often ("Could not load the default credentials"): nothing
 * was sent. The store turns it into a `BackendError` of kind
 * `'authentication'` when the cause speaks of credentials.
 */
export class ClientSetupFailed extends Error {
  /**
   * FAILED_PRECONDITION, which the client retries neither as a request nor as
   * a transaction: each attempt would fail the same way.
   */
  readonly code = FAILED_PRECONDITION;

  constructor(cause: unknown) {
    super(`the Firestore client could not be set up: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
    this.name = 'ClientSetupFailed';
  }

  /** Whether it was the credentials (none found, or not usable). */
  get credentials(): boolean {
    return /credential/i.test(this.message);
  }
}

/**
 * Keeps the client's own promises, of the store's RPCs, from ending the host
 * process, by guarding `run` of its internal `ClientPool` for the store's
 * calls (and only those):
 *
 * - When `terminate()` comes while `@google-cloud/firestore` waits to retry a
 *   streaming read, the retry's `run` rejects ("The client has already been
 *   terminated") in a promise the client drops: an unhandled rejection. It
 *   is marked handled: the call that sent the read has failed at its deadline
 *   already, and the read never settles.
 * - Each RPC method of the inner (gapic) client starts by setting it up, and
 *   drops the rejection when that fails (no credentials found, say): one
 *   unhandled rejection per request, and a request that never answers. The
 *   set-up is awaited first here instead, once per inner client: when it
 *   fails, the request is given a stand-in whose methods throw a
 *   {@link ClientSetupFailed}, so that it fails at once by its own error path,
 *   and no method of the inner client is called.
 *
 * The rest of the application's use of the client is left alone, and a
 * client without that pool (another major) as it is; closing the service
 * before terminating the client avoids the first case altogether.
 */
export function guardClientPool(firestore: object): void {
  const pool = (firestore as { _clientPool?: { run?: unknown } })._clientPool;
  if (typeof pool !== 'object' || pool === null || guardedPools.has(pool)) return;
  const run = pool.run;
  if (typeof run !== 'function') return;
  pool.run = function guardedRun(this: unknown, ...args: unknown[]) {
    const ours = scope.getStore() !== undefined;
    const op = args[2];
    if (ours && typeof op === 'function') {
      args[2] = (client: unknown) =>
        typeof client !== 'object' || client === null || readyClients.has(client)
          ? op(client)
          : setUp(client).then(
              () => op(client),
              // The request's own error path (the client waits on what the request does, not on this promise).
              (failure: unknown) => op(failingClient(failure)),
            );
    }
    const result: unknown = run.apply(this, args);
    if (result instanceof Promise && ours) result.catch(() => undefined);
    return result;
  };
  guardedPools.add(pool);
}

/** An inner client whose every method throws `failure`: what a request is given when its client could not be set up. */
function failingClient(failure: unknown): object {
  return new Proxy(
    {},
    {
      get: (_target, name) =>
        name === 'then'
          ? undefined
          : () => {
              throw failure;
            },
    },
  );
}

/** Sets up an inner client (`initialize()`, which the client's own methods call without handling its failure). */
async function setUp(client: object): Promise<void> {
  const initialize = (client as { initialize?: unknown }).initialize;
  if (typeof initialize === 'function') {
    try {
      await initialize.call(client);
    } catch (error) {
      throw new ClientSetupFailed(error);
    }
  }
  readyClients.add(client);
}

/**
 * How long past the call's deadline the reads of a read-write transaction
 * may run, the client's retries included (see {@link withTransactionGrace}).
 */
export const TRANSACTION_GRACE_MS = 10_000;

/**
 * Runs `work` with the call's deadline moved {@link TRANSACTION_GRACE_MS}
 * later, for the reads of a read-write transaction: the first one begins the
 * transaction on the server, and a read cut off at the deadline could leave
 * a transaction whose locks nobody releases (the client never learns its id)
 * until the server ends it. Given the grace, a read that the server answers
 * late still returns the id, the store stops at its next step, and the client
 * rolls the transaction back; a server that answers nothing within it does
 * not keep the client's work going (the client's own bound is minutes).
 */
export function withTransactionGrace<T>(work: () => T): T {
  const call = scope.getStore();
  if (call === undefined) return work();
  // Still requests of the call (counted for its span, their streams not retried within an attempt).
  const graced: StoreCall = {
    get signal() {
      return call.signal;
    },
    deadline: call.deadline + TRANSACTION_GRACE_MS,
    usage: call.usage,
  };
  return scope.run(graced, work);
}

/** Runs `work` as part of `call`: the RPCs it sends carry the call's deadline. */
export function withCall<T>(call: StoreCall | undefined, work: () => Promise<T>): Promise<T> {
  return call ? scope.run(call, work) : work();
}

/** The call's deadline passed; the store stopped before its next step. */
export class CallAbandoned extends Error {
  constructor() {
    super("the call's deadline (timeoutMs) passed; the store stopped before its next request");
    this.name = 'CallAbandoned';
  }
}

/** Throws {@link CallAbandoned} once the call's deadline has passed (see core's `callAbandoned`). */
export function checkCall(call: StoreCall | undefined): void {
  if (callAbandoned(call)) throw new CallAbandoned();
}

/**
 * Waits for every promise (so none is left running, or rejecting, behind
 * the caller's back) and then returns their values or throws the first
 * failure.
 */
export async function settleAll<T extends readonly unknown[]>(
  promises: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const results = await Promise.allSettled(promises);
  const values: unknown[] = [];
  for (const result of results) {
    if (result.status === 'rejected') throw result.reason;
    values.push(result.value);
  }
  return values as unknown as T;
}

/**
 * The promises a store has started and not yet seen settle: the calls it was
 * given, and any read it runs beside them that may outlive its call. What
 * `close()` waits for, so that the client is terminated with nothing of the
 * store's still retrying in it.
 */
export class InFlight {
  readonly #running = new Set<Promise<unknown>>();

  /** Holds `promise` until it settles, and returns it as it is (its rejection still reaches its caller). */
  track<T>(promise: Promise<T>): Promise<T> {
    const running = this.#running;
    running.add(promise);
    const done = () => {
      running.delete(promise);
    };
    promise.then(done, done);
    return promise;
  }

  /**
   * Resolves once every promise held now or added meanwhile has settled, or
   * once `ms` have passed, with how many were still running then.
   */
  async settle(ms: number): Promise<number> {
    const running = this.#running;
    const end = performance.now() + ms;
    while (running.size > 0) {
      const left = end - performance.now();
      if (left <= 0 || !(await settledWithin(left, Promise.allSettled([...running])))) break;
    }
    return running.size;
  }
}

/** The gRPC status code of a client error (6 is ALREADY_EXISTS, 9 FAILED_PRECONDITION), if it has one. */
export function grpcCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

export const ALREADY_EXISTS = 6;
export const FAILED_PRECONDITION = 9;
