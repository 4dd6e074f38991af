/**
 * The backends the bench measures on: a server it starts (or the bench's own
 * process), the facts it reports about it, and the trivial requests that give
 * its raw round-trip rate. Targets (`../targets/types.ts`) run on these.
 */

/** One trivial request to a backend: its physical limit from this client. */
export interface Probe {
  /** e.g. `PING`, `SELECT 1`. */
  name: string;
  run(): Promise<unknown>;
}

/** A backend the bench started (or an in-process one). */
export interface RunningBackend {
  /** Facts printed with the results: version, the settings that matter. */
  details: string;
  /** Round trips that do no work: the rate no store on this backend can beat. */
  probes: Probe[];
  /**
   * Server processes that left the bench's process tree (a daemon such as
   * PostgreSQL's postmaster, started by `pg_ctl`), so that they are pinned
   * with the servers that stayed its children.
   */
  detachedPids?(): number[];
  stop(): Promise<void>;
}

export interface BackendSpec<B extends RunningBackend = RunningBackend> {
  id: string;
  label: string;
  start(): Promise<B>;
}

/** The backend of targets that live in the bench's own process. */
export const IN_PROCESS: BackendSpec = {
  id: 'in-process',
  label: 'in process',
  async start() {
    return { details: 'no server: the store lives in the bench process', probes: [], async stop() {} };
  },
};
