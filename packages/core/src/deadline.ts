/**
 * The deadline of one service call, shared by every store step the call
 * makes, so a call is bounded as a whole however many steps it takes.
 *
 * A call costs no timer and no `AbortController` of its own: the pending
 * deadlines of one duration expire in the order they were made, so they wait
 * in one queue behind one timer (set for the oldest), and the abort signal is
 * made only when a store asks for it.
 */
import type { StoreCall } from './store.js';
import type { StoreUsage } from './telemetry.js';

/** A store step was abandoned, or never begun, because the call's deadline passed. */
export class DeadlineExceeded extends Error {
  /** False when the deadline had passed before the step was begun. */
  readonly started: boolean;

  constructor(timeoutMs: number, started: boolean) {
    super(`no answer within the ${timeoutMs} ms deadline (timeoutMs)`);
    this.name = 'DeadlineExceeded';
    this.started = started;
  }
}

/**
 * The pending deadlines of one duration, oldest first (a doubly linked list,
 * so that a call that ends leaves it at once), and the one timer that expires
 * them. The timer holds the process open only while a call is pending, as a
 * timer of each call's own would.
 */
class DeadlineQueue {
  readonly timeoutMs: number;
  head: Deadline | undefined;
  tail: Deadline | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the armed timer fires. */
  #due = 0;
  #held = false;

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
  }

  add(deadline: Deadline): void {
    deadline.prev = this.tail;
    if (this.tail) this.tail.next = deadline;
    else this.head = deadline;
    this.tail = deadline;
    if (this.#timer === undefined) this.#arm(deadline.deadline);
    else if (!this.#held) {
      this.#timer.ref();
      this.#held = true;
    }
  }

  remove(deadline: Deadline): void {
    if (deadline.prev) deadline.prev.next = deadline.next;
    else if (this.head === deadline) this.head = deadline.next;
    else return; // not queued (already expired or removed)
    if (deadline.next) deadline.next.prev = deadline.prev;
    else this.tail = deadline.prev;
    deadline.prev = undefined;
    deadline.next = undefined;
    if (this.head === undefined && this.#timer !== undefined && this.#held) {
      // Nothing pending: the armed timer may fire (and find nothing) but must not keep the process open.
      this.#timer.unref();
      this.#held = false;
    }
  }

  #arm(at: number): void {
    this.#due = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, at - Date.now()));
    this.#held = true;
  }

  #fire(): void {
    this.#timer = undefined;
    const now = Date.now();
    // Timers may fire a little early on some platforms: a deadline is due from its own time on.
    for (let at = this.head; at !== undefined && at.deadline <= Math.max(now, this.#due); at = this.head) {
      this.remove(at);
      at.expire();
    }
    if (this.head) this.#arm(this.head.deadline);
  }
}

/** One queue per duration in use (a service has one duration; a process has a few services). */
const queues = new Map<number, DeadlineQueue>();

function queueFor(timeoutMs: number): DeadlineQueue {
  let queue = queues.get(timeoutMs);
  if (!queue) {
    queue = new DeadlineQueue(timeoutMs);
    queues.set(timeoutMs, queue);
  }
  return queue;
}

export class Deadline implements StoreCall {
  readonly deadline: number;
  /** {@link Deadline.run} stops waiting at the deadline, whatever the store does. */
  readonly bounded = true;
  /** @internal Links of the queue of pending deadlines. */
  prev: Deadline | undefined;
  /** @internal */
  next: Deadline | undefined;
  readonly #timeoutMs: number;
  readonly #queue: DeadlineQueue | undefined;
  #controller: AbortController | undefined;
  #expired = false;
  /** The rejection of the step running now, called when the deadline passes. */
  #waiting: (() => void) | undefined;
  /** Those of further steps running at the same time (rare: a store's steps nearly always run one by one). */
  #moreWaiting: Set<() => void> | undefined;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    this.deadline = Date.now() + timeoutMs;
    if (Number.isFinite(timeoutMs)) {
      this.#queue = queueFor(timeoutMs);
      this.#queue.add(this);
    }
  }

  /** Aborted when the deadline passes; made on first use. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#expired) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  /** @internal Called by the queue when the deadline passes. */
  expire(): void {
    this.#expired = true;
    this.#controller?.abort();
    const first = this.#waiting;
    const more = this.#moreWaiting;
    this.#waiting = undefined;
    this.#moreWaiting = undefined;
    first?.();
    if (more) for (const reject of more) reject();
  }

  /**
   * Runs one store step: its result, or {@link DeadlineExceeded} as soon as
   * the deadline passes. An abandoned step's later rejection is handled here,
   * so it never becomes an unhandled rejection of the host process.
   */
  run<T>(step: (call: StoreCall) => Promise<T>): Promise<T> {
    if (this.#expired) return Promise.reject(new DeadlineExceeded(this.#timeoutMs, false));
    let pending: Promise<T>;
    try {
      pending = step(this);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.#queue === undefined) return pending;
    if (this.#expired) {
      // The step's own synchronous part outlasted the deadline.
      pending.catch(() => {});
      return Promise.reject(new DeadlineExceeded(this.#timeoutMs, true));
    }
    return new Promise<T>((resolve, reject) => {
      const expire = () => reject(new DeadlineExceeded(this.#timeoutMs, true));
      this.#wait(expire);
      pending.then(
        (value) => {
          this.#stopWaiting(expire);
          resolve(value);
        },
        (error: unknown) => {
          this.#stopWaiting(expire);
          reject(error);
        },
      );
    });
  }

  #wait(expire: () => void): void {
    if (this.#waiting === undefined) {
      this.#waiting = expire;
      return;
    }
    this.#moreWaiting ??= new Set();
    this.#moreWaiting.add(expire);
  }

  #stopWaiting(expire: () => void): void {
    if (this.#waiting === expire) this.#waiting = undefined;
    else this.#moreWaiting?.delete(expire);
  }

  /** The same deadline for one traced step, with the step's usage record. */
  withUsage(usage: StoreUsage): StoreCall {
    const deadline = this;
    return {
      get signal() {
        return deadline.signal;
      },
      deadline: this.deadline,
      bounded: true,
      usage,
    };
  }

  /** Leaves the queue; the call is over. */
  dispose(): void {
    this.#queue?.remove(this);
  }
}
