/** Small helpers for the servers the bench starts: free ports and commands. */
export { freePort, run } from '@adk-state/test-servers';

/** Runs `count` calls of `operation` on `workers` concurrent loops. */
export async function runConcurrently(
  count: number,
  workers: number,
  operation: () => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const loop = async () => {
    while (next < count) {
      next++;
      await operation();
    }
  };
  await Promise.all(Array.from({ length: Math.min(workers, count) }, loop));
}
