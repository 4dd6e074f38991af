/** Timing a call that should fail: how long it took, its error, or that it was still pending. */

/** The fields of an adk-state error the failure tests look at. */
export interface Failure {
  name?: string;
  code?: string;
  message?: string;
  mayHaveApplied?: boolean;
  timedOut?: boolean;
}

/** What became of a call within `limitMs`. */
export interface Settled {
  ms: number;
  error?: Failure;
  /** False when the call was still pending after `limitMs`. */
  settled: boolean;
}

/** Settles `promise` and times it, never waiting past `limitMs`. */
export async function settleWithin(promise: Promise<unknown>, limitMs: number): Promise<Settled> {
  const started = Date.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), limitMs);
  });
  try {
    const outcome = await Promise.race([
      promise.then(
        () => ({ error: undefined }),
        (error: unknown) => ({ error: error as Failure }),
      ),
      late,
    ]);
    if (outcome === 'late') return { ms: Date.now() - started, settled: false };
    return { ms: Date.now() - started, settled: true, ...outcome };
  } finally {
    clearTimeout(timer);
  }
}
