/** Medians and spread of repeated samples, and the clock. */

export interface Summary {
  median: number;
  min: number;
  max: number;
  /** Every recorded sample, in the order taken. */
  samples: number[];
}

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('no samples to summarize');
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  return { median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number, samples: [...samples] };
}

/** Half the min–max range relative to the median, in percent (0 when there is one sample). */
export function spreadPercent(summary: Summary): number {
  if (summary.median === 0) return 0;
  return ((summary.max - summary.min) / 2 / Math.abs(summary.median)) * 100;
}

/** Milliseconds since an arbitrary origin, with nanosecond resolution. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
