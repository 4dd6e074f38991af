/**
 * The deadline of one service call: one timer, one abort signal, shared by
 * every store step the call makes, so a call is bounded as a whole however
 * many steps it takes.
 */
import type { StoreCall } from './store.js';

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

export class Deadline implements StoreCall {
  readonly signal: AbortSignal;
  readonly deadline: number;
  readonly #timeoutMs: number;
  readonly #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(timeoutMs: number) {
    const controller = new AbortController();
    this.signal = controller.signal;
    this.#timeoutMs = timeoutMs;
    this.deadline = Date.now() + timeoutMs;
    if (Number.isFinite(timeoutMs)) this.#timer = setTimeout(() => controller.abort(), timeoutMs);
  }

  /**
   * Runs one store step: its result, or {@link DeadlineExceeded} as soon as
   * the deadline passes. An abandoned step's later rejection is handled here,
   * so it never becomes an unhandled rejection of the host process.
   */
  run<T>(step: (call: StoreCall) => Promise<T>): Promise<T> {
    if (this.signal.aborted) return Promise.reject(new DeadlineExceeded(this.#timeoutMs, false));
    let pending: Promise<T>;
    try {
      pending = step(this);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.#timer === undefined) return pending;
    return new Promise<T>((resolve, reject) => {
      const expire = () => reject(new DeadlineExceeded(this.#timeoutMs, true));
      this.signal.addEventListener('abort', expire, { once: true });
      pending.then(
        (value) => {
          this.signal.removeEventListener('abort', expire);
          resolve(value);
        },
        (error: unknown) => {
          this.signal.removeEventListener('abort', expire);
          reject(error);
        },
      );
    });
  }

  /** Stops the timer; the call is over. */
  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }
}
