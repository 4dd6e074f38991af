/**
 * Puts the bench and the servers it started on separate cores, as an app and
 * its database are on separate machines. Left to the scheduler, a client and
 * a server on a small VM sometimes share one core (a round trip is then a
 * context switch, several times faster) and sometimes not (each round trip
 * wakes the other core), and which of the two a sample gets is chance: the
 * raw round-trip rates would swing several-fold between samples and runs.
 * Pinned, every sample of every target crosses cores alike.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { run } from './backends/process.js';

/** How the run was placed, for the report; undefined when nothing was pinned. */
export interface Placement {
  clientCpus: string;
  serverCpus: string;
  /** Server processes (and their threads) pinned. */
  serverProcesses: number;
}

/**
 * Pins this process (all its threads) to the first core and every process it
 * started so far, with their descendants, to the others, and so too the
 * `detached` server processes (daemons that left its tree) with theirs. Call
 * once the servers run and before any is measured: processes they fork later
 * (a PostgreSQL backend per connection) inherit the servers' cores. Needs
 * Linux, two cores and `taskset` (util-linux); otherwise pins nothing and says why.
 */
export async function separateCores(
  log: (line: string) => void,
  detached: readonly number[] = [],
): Promise<Placement | undefined> {
  const cores = cpus().length;
  if (process.platform !== 'linux' || cores < 2) {
    log('not pinning: needs Linux and at least two cores');
    return undefined;
  }
  const clientCpus = '0';
  const serverCpus = cores === 2 ? '1' : `1-${cores - 1}`;
  try {
    await run('taskset', ['--all-tasks', '--cpu-list', '--pid', clientCpus, String(process.pid)]);
  } catch (error) {
    log(`not pinning: ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  }
  const tree = childrenByParent();
  const servers = [...descendants(tree, process.pid)];
  for (const pid of detached) servers.push(pid, ...descendants(tree, pid));
  for (const pid of servers) {
    try {
      await run('taskset', ['--all-tasks', '--cpu-list', '--pid', serverCpus, String(pid)]);
    } catch {
      // The process ended in between (a short-lived helper): nothing to pin.
    }
  }
  log(`pinned: the bench on CPU ${clientCpus}, ${servers.length} server process(es) on CPU ${serverCpus}`);
  return { clientCpus, serverCpus, serverProcesses: servers.length };
}

/** The live processes by parent, from /proc. */
function childrenByParent(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const siblings = children.get(parent) ?? [];
    siblings.push(Number(name));
    children.set(parent, siblings);
  }
  return children;
}

/** Every descendant of `root` in `children`. */
function descendants(children: Map<number, number[]>, root: number): number[] {
  const found: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    found.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** One line for the report. */
export function placementLine(placement: Placement | undefined): string {
  if (!placement) return 'not pinned: the scheduler placed the bench and the servers';
  return `the bench pinned to CPU ${placement.clientCpus}, the servers it started (${placement.serverProcesses} processes) to CPU ${placement.serverCpus}`;
}
