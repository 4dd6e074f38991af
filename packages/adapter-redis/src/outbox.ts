/**
 * The cluster protocol for `app:` keys: the TypeScript half (the Lua half is
 * `OUTBOX`, `APPLY`, `READ_APP` and `PEEK` in `scripts.ts`).
 *
 * On a Redis Cluster an app's users are spread over `shards` slots and its
 * app bucket has a slot of its own, so a write that changes `app:` keys
 * cannot change them in the script that stores its event. Instead:
 *
 * 1. The write's script puts the app delta into its shard's outbox, at a
 *    position that is unique for that shard forever: the shard's clock in
 *    microseconds, or one more than the last position given, whichever is
 *    higher. Positions only grow, whatever sessions are deleted, expire or
 *    are created again under the same id, and whichever service instance
 *    writes; after a failover to a replica that had not received the last
 *    positions, the new master's clock is past them (failover takes seconds;
 *    clocks are assumed to agree to well within that).
 * 2. The writer applies the shard's outbox to the app slot: every entry
 *    above the shard's mark there, in order, then the mark is raised to the
 *    last one. An entry at or below the mark is skipped, so an apply that
 *    arrives late (delayed on the network, after a delete, after another
 *    writer or a drain already applied it) or twice changes nothing. The
 *    write is acknowledged after this step.
 * 3. The next write to the shard (or a drain) tells the shard the mark it
 *    learned, whatever that write's own answer (stale, missing, stored); the
 *    mark is kept until a script has recorded it, so a write that fails does
 *    not lose it. Entries known applied are removed `outboxKeepMs` after
 *    they were written (so a reader whose app read was just before can still
 *    lay them over, and a failover of the app slot can be caught up). An
 *    outbox holds only entries of the last `outboxKeepMs`, and the marks one field
 *    per shard: nothing grows with the number of writes or of sessions.
 *
 * A writer that dies between 1 and 2 leaves its entry in the outbox. A later
 * write to the same shard applies it with its own; otherwise the next drain
 * does: a read of the app slot (getSession, listSessions, getAppState) that
 * finds the last drain started at least `drainMs` ago claims the next one,
 * which reads every shard's outbox and applies what it finds, in the
 * background.
 *
 * An entry at or below the shard's `known` position but above the app
 * slot's mark was applied once and lost since by the app slot (a failover to
 * a replica that lagged). Writers, readers and drains find such a shard (its
 * view's floor is above the mark) and apply those entries again, but only to
 * the state keys whose value was made before the entry: the app slot keeps
 * beside the bucket the position of the entry each key's value came from (see
 * `APPLY`). So is an entry applied `lateUs` or more after it was made (a dead
 * writer's, an apply held past a failover, one the app slot lost before its
 * shard was told): it lands only on the keys whose value was made before it.
 *
 * A session read is of one moment: it reads the session with its shard's
 * outbox (position `last`, entries above `floor`) and the app bucket with the
 * shard's mark, and lays the entries above the mark over the bucket. That is
 * exact when floor <= mark <= last; otherwise it reads again, the app slot
 * first. When the two slots still disagree (a failover lost applied marks or
 * outbox positions), the read repairs the mark or the position, reports it
 * through the store's warning callback, and shows what is there. No state of
 * the two slots makes a read fail. A drain, whose marks are read before the
 * shards, lowers a mark above every position its shard gave the same way.
 */
import { setMaxListeners } from 'node:events';
import { type StoreCall, settledWithin, ToldOnce, UnreadableDataError } from '@adk-state/core/store';
import { type AppKeys, appKeys, type ShardKeys, shardKeys } from './keys.js';
import { APPLY, argList, keyList, MARK_AHEAD_US, PEEK, RAISE, READ_APP, type Script } from './scripts.js';

/**
 * Runs one script for one store step (the store's `#run`). A write waits for
 * the replicas (`waitForReplicas`) unless `waited` is false: the protocol's
 * own bookkeeping (drains, mark hand-overs, a reader's apply of what it
 * found waiting, the removal of applied entries) is not a caller's write,
 * and a lagging replica must not stall it, nor the reads queued behind it.
 */
export type Runner = (
  operation: string,
  write: boolean,
  call: StoreCall | undefined,
  target: Script,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
  waited?: boolean,
) => Promise<unknown>;

/** {@link Runner}'s `waited` for the protocol's bookkeeping writes. */
const UNWAITED = false;

/** Something the store noticed and repaired, or could not do, that nothing else reports. */
export interface RedisStoreWarning {
  /**
   * `app-mark-behind`: the app slot lost marks of applied entries;
   * `shard-position-behind`: the app slot's mark of a shard was none of the
   * shard's positions (the shard lost them in a failover, or the mark was
   * changed outside the store) and was lowered; `app-mark-ahead`: the same,
   * with a mark more than a minute ahead of the app slot's clock (changed
   * outside the store; for a lowering that failed, of this process's clock);
   * `drain-failed`:
   * a drain could not read or apply every shard; `read-not-one-moment`: a
   * session read met writes between its reads every time and shows its last read;
   * `unreadable-outbox-entry`: an outbox entry not written by the store (changed
   * outside it) was applied as nothing.
   */
  code:
    | 'app-mark-behind'
    | 'app-mark-ahead'
    | 'shard-position-behind'
    | 'drain-failed'
    | 'read-not-one-moment'
    | 'unreadable-outbox-entry';
  message: string;
  appName: string;
  shard?: number;
  cause?: unknown;
  /**
   * How many warnings like this one (same code, app and shard) the store held
   * back since it gave the last: it gives one at most every 10 seconds.
   */
  held?: number;
}

/** A shard's outbox as a reader or an applier sees it. */
export interface OutboxView {
  /** The last position given. */
  last: number;
  /** Every entry above this position is in `entries`. */
  floor: number;
  /**
   * The highest position the shard was told the app slot had applied (-1:
   * none): an entry at or below it that is above the app slot's mark was
   * applied once and lost since (a failover), see `APPLY`.
   */
  known: number;
  /**
   * Entries above `floor`, ascending: position, delta (JSON text of field,
   * value, ..., as the scripts take it) and the delta's fields and values.
   */
  entries: Array<[number, string, readonly string[]]>;
}

/** The reply shape of the Lua `outbox_view`: last, floor, entries, known. */
export type OutboxReply = [string, string, string[], string];

/**
 * An outbox view of a script's reply. An entry the scripts did not write (a
 * position that is not a number, a delta that is not a list of field/value
 * texts: changed outside adk-state) cannot block the app's reads and
 * writes: a position that is no number is left out, a delta that cannot be
 * read is applied as nothing, and `onUnreadable` is told of both.
 */
export function parseView(reply: OutboxReply, onUnreadable?: (position: string) => void): OutboxView {
  const [last, floor, flat, known] = reply;
  const entries: OutboxView['entries'] = [];
  for (let index = 0; index < flat.length; index += 2) {
    const position = Number(flat[index]);
    const delta = flat[index + 1];
    if (!Number.isFinite(position)) {
      onUnreadable?.(String(flat[index]));
      continue;
    }
    const fields = deltaFields(delta);
    if (fields) entries.push([position, delta as string, fields]);
    else {
      // A position the outbox no longer holds a delta for (its index outlived it) is applied as nothing
      // without a word: entries at or below a mark are never applied, and the reads repair the rest.
      // (Missing comes as nil, or as false through the scripts' JSON replies.)
      if (delta !== null && delta !== undefined && (delta as unknown) !== false) onUnreadable?.(String(flat[index]));
      entries.push([position, EMPTY_DELTA, []]);
    }
  }
  entries.sort((a, b) => a[0] - b[0]);
  const knownPosition = Number(known);
  return {
    last: Number(last),
    floor: Number(floor),
    entries,
    known: Number.isFinite(knownPosition) ? knownPosition : -1,
  };
}

/** A delta that writes nothing. */
const EMPTY_DELTA = '[]';

/**
 * The fields and values of `delta` when it is what writes put in an outbox
 * (the JSON text of a list of field, value, … texts), else `undefined`.
 */
function deltaFields(delta: unknown): string[] | undefined {
  if (typeof delta !== 'string') return undefined;
  let fields: unknown;
  try {
    fields = JSON.parse(delta);
  } catch {
    return undefined;
  }
  if (!Array.isArray(fields) || fields.length % 2 !== 0) return undefined;
  for (const field of fields) if (typeof field !== 'string') return undefined;
  return fields as string[];
}

/** The app state a read shows: the bucket with the entries above `mark` laid over it, in order. */
export function layOver(bucket: string[], mark: number, view: OutboxView): string[] {
  const later = view.entries.filter(([position]) => position > mark);
  if (later.length === 0) return bucket;
  const state = new Map<string, string>();
  for (let index = 0; index < bucket.length; index += 2)
    state.set(bucket[index] as string, bucket[index + 1] as string);
  for (const [, , fields] of later) {
    for (let index = 0; index < fields.length; index += 2)
      state.set(fields[index] as string, fields[index + 1] as string);
  }
  return [...state].flat();
}

/** How many (app, shard) marks a store remembers to hand to the shard. */
const ACK_MEMORY = 10_000;

/**
 * How many times an apply finds the app slot's mark behind the shard's
 * entries (reading the outbox again and raising the mark each time) before
 * it gives up: a mark the repair cannot raise (changed outside the store)
 * fails the apply instead of holding it until its deadline.
 */
const APPLY_ATTEMPTS = 5;

/** How many times a session read reads before it shows the newest it read, and says so. */
const READ_ATTEMPTS = 4;

/** How long a drain, or a handing over of marks, may take in all. */
const DRAIN_TIMEOUT_MS = 30_000;

/** How soon a mark learned from an apply is handed to its shard when no write of the shard takes it along. */
const ACK_FLUSH_MS = 500;
/** A position or a mark as the scripts write it: decimal digits below 2^53 (see `MARK` in scripts.ts). */
const POSITION = /^\d{1,16}$/;

/** How long `close()` lets running drains and mark hand-overs finish before it abandons them. */
const CLOSE_WAIT_MS = 5_000;

/** Whether a view of a shard and the app slot's mark of it show one moment: every entry above the mark is in the view. */
export function oneMoment(view: OutboxView, mark: number): boolean {
  return view.floor <= mark && mark <= view.last;
}

export interface OutboxOptions {
  prefix: string;
  shards: number;
  /** The least time between two drains of one app, in milliseconds. */
  drainMs: number;
  /** How long entries known applied stay in an outbox, in microseconds (as text, for the scripts). */
  keepUs: string;
  /** How long after it was made an entry's apply is a catch-up, in microseconds (as text, for the scripts; see `APPLY`). */
  lateUs: string;
  warn: (warning: RedisStoreWarning) => void;
}

/** A session read's shard side: the load result and the shard's outbox. */
export interface ShardRead<T> {
  result: T;
  view: OutboxView;
}

export class Outbox {
  readonly #run: Runner;
  readonly #options: OutboxOptions;
  /** `<app>#<shard>` -> the last mark learned for it, until handed to the shard. */
  readonly #acks = new Map<string, string>();
  /** `<app>#<shard>` -> the last mark read (a reader's first guess of `from`). */
  readonly #marks = new Map<string, number>();
  /** Background work (drains, mark hand-overs) that `close()` waits for. */
  readonly #drains = new Set<Promise<void>>();
  /** `<app>#<shard>` -> the timer that hands the shard its mark if no write does first. */
  readonly #flushes = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #stop = new AbortController();
  /** Outbox entries warned about as unreadable (`<app>#<shard>#<position>`), so that each is told once. */
  readonly #unreadable = new ToldOnce(ACK_MEMORY);

  constructor(run: Runner, options: OutboxOptions) {
    this.#run = run;
    this.#options = options;
  }

  /** A shard's outbox view of a script's reply, warning (once each) of entries that cannot be read. */
  view(reply: OutboxReply, appName: string, shard: number): OutboxView {
    return parseView(reply, (position) => {
      if (!this.#unreadable.first(`${slotId(appName, shard)}#${position}`)) return;
      this.#options.warn({
        code: 'unreadable-outbox-entry',
        appName,
        shard,
        message: `the entry at position ${JSON.stringify(position)} of shard ${shard}'s outbox is not what the store writes (changed outside it): it is applied as nothing, its app: writes are lost`,
      });
    });
  }

  /**
   * The mark learned for a shard and not yet handed to it ('' for none), for
   * the next script that goes to the shard. It is kept until such a script
   * has answered ({@link delivered}): a write that fails, or stops at data it
   * cannot read, leaves it for the next one.
   */
  pendingAck(appName: string, shard: number): string {
    return this.#acks.get(slotId(appName, shard)) ?? '';
  }

  /** The shard has recorded `ack`: it is forgotten, unless a later mark was learned meanwhile. */
  delivered(appName: string, shard: number, ack: string): void {
    if (ack === '') return;
    const id = slotId(appName, shard);
    if (this.#acks.get(id) === ack) this.#acks.delete(id);
  }

  /**
   * Notes a mark read from the app slot: the latest one seen, not the
   * highest (after a failover the app slot's mark can fall back, and a read
   * that starts from a higher guess would read twice every time). The shard
   * keeps the highest acknowledgement it is given, so handing it a lower one
   * changes nothing there. A mark learned from an apply is handed to the
   * shard by the next write of this store to it, or soon after by itself,
   * so that the shard can remove what is applied whoever writes next.
   */
  #learn(appName: string, shard: number, mark: string, applied = false): void {
    // None ('-1', ''), or not a position: never handed to a shard (the scripts answer none for those).
    if (!POSITION.test(mark)) return;
    const id = slotId(appName, shard);
    remember(this.#marks, id, Number(mark));
    remember(this.#acks, id, mark);
    if (applied && !this.#flushes.has(id) && !this.#stop.signal.aborted) {
      const timer = setTimeout(() => {
        this.#flushes.delete(id);
        this.#handOver(appName, shard);
      }, ACK_FLUSH_MS);
      timer.unref?.();
      this.#flushes.set(id, timer);
    }
  }

  /** Hands the shard the mark learned for it, if no write took it along meanwhile (in the background). */
  #handOver(appName: string, shard: number): void {
    const ack = this.pendingAck(appName, shard);
    if (ack === '') return;
    const keys = shardKeys(this.#options.prefix, appName, shard, this.#options.shards);
    const signal = AbortSignal.any([this.#stop.signal, AbortSignal.timeout(DRAIN_TIMEOUT_MS)]);
    const running = this.#run(
      'handOver',
      true,
      { signal, deadline: Date.now() + DRAIN_TIMEOUT_MS },
      PEEK,
      keyList(PEEK, keys),
      argList(PEEK, { ack, from: '', keepUs: this.#options.keepUs }),
      UNWAITED,
    ).then(
      () => this.delivered(appName, shard, ack),
      () => {},
    );
    this.#track(running);
  }

  #track(running: Promise<void>): void {
    this.#drains.add(running);
    void running.finally(() => this.#drains.delete(running));
  }

  /**
   * Step 2 of a write: applies `view`'s entries of `shard` to the app slot.
   * The write's first step is applied by then, so a failure here says the
   * write may have been applied, whatever its cause. When the app slot's
   * mark is below the view's floor (it lost marks in a failover), the outbox
   * is read again from the mark and applied from there; entries already
   * removed from the outbox are lost, and the mark is raised past them.
   * `wantBucket` asks for the bucket after (`'caught'`: only when this apply
   * caught an entry up, see `APPLY`); `waited` (default true) makes
   * the apply wait for the replicas (a writer's second step does, the
   * bookkeeping does not). Resolves with the bucket (undefined unless asked
   * for), the highest position of the shard's entries ever caught up (lost
   * by the app slot, or applied late; -1: none), and the shard's mark after it.
   */
  async apply(
    operation: string,
    call: StoreCall | undefined,
    appName: string,
    shard: number,
    view: OutboxView,
    {
      wantBucket,
      waited = true,
      lower,
    }: { wantBucket: boolean | 'caught'; waited?: boolean; lower?: { from: number; to: number } },
  ): Promise<{ bucket: string[] | undefined; caughtUp: number; mark: number; lowered: 0 | 1 | 2 }> {
    const app = appKeys(this.#options.prefix, appName);
    const lowering = lower
      ? { lowerShard: String(shard), lowerFrom: String(lower.from), lowerTo: String(lower.to) }
      : NO_LOWERING;
    let current = view;
    for (let attempt = 1; ; attempt++) {
      const reply = (await this.#run(
        operation,
        true,
        call,
        APPLY,
        keyList(APPLY, { appState: app.appState, marks: app.marks, written: app.written }),
        argList(
          APPLY,
          {
            wantBucket: wantBucket === 'caught' ? '2' : wantBucket ? '1' : '0',
            lateUs: this.#options.lateUs,
            ...lowering,
          },
          group(shard, current),
        ),
        waited,
      )) as [Array<string | number>, string[] | number];
      const [marks, bucket] = reply;
      const mark = String(marks[1]);
      const state = Number(marks[2]);
      if (state !== 1) {
        this.#learn(appName, shard, mark, true);
        const caughtUp = POSITION.test(String(marks[3])) ? Number(marks[3]) : -1;
        const lowered = state === 2 ? 1 : state === 3 ? 2 : 0;
        if (!lower) this.#lowered(appName, shard, state);
        return { bucket: Array.isArray(bucket) ? bucket : undefined, caughtUp, mark: Number(mark), lowered };
      }
      if (attempt >= APPLY_ATTEMPTS) {
        throw new UnreadableDataError(
          `the app slot's mark of shard ${shard} (${mark}) stays below the shard's entries after ${attempt} repairs: the marks hash holds what the store cannot raise (changed outside it?)`,
        );
      }
      // The app slot is behind the view: read the outbox again from its mark.
      const keys = shardKeys(this.#options.prefix, appName, shard, this.#options.shards);
      current = this.view(
        (await this.#run(
          operation,
          true,
          call,
          PEEK,
          keyList(PEEK, keys),
          argList(PEEK, { ack: '', from: mark, keepUs: this.#options.keepUs }),
          UNWAITED,
        )) as OutboxReply,
        appName,
        shard,
      );
      if (current.floor > Number(mark) || attempt >= 3)
        await this.#raiseLost({ operation, call, appName, shard, mark: Number(mark), view: current });
    }
  }

  /**
   * The app bucket and `shard`'s mark (-1 when none, or no shard asked);
   * claims and starts a drain of the app when one is due.
   */
  async readApp(
    operation: string,
    call: StoreCall | undefined,
    appName: string,
    shard: number | undefined,
  ): Promise<{ bucket: string[]; mark: number; lowered: number }> {
    const [bucket, mark, claimed, marks, lowered] = await this.#readApp(operation, call, appName, shard, false);
    if (shard !== undefined) this.#learn(appName, shard, mark);
    if (Number(claimed) === 1) this.#startDrain(appName, shardMarks(marks));
    return { bucket, mark: mark === '' ? -1 : Number(mark), lowered: Number(lowered ?? -1) };
  }

  #readApp(
    operation: string,
    call: StoreCall | undefined,
    appName: string,
    shard: number | undefined,
    allMarks: boolean,
  ): Promise<AppReadReply> {
    const app = appKeys(this.#options.prefix, appName);
    return this.#run(
      operation,
      false,
      call,
      READ_APP,
      keyList(READ_APP, { appState: app.appState, marks: app.marks }),
      argList(READ_APP, {
        shard: shard === undefined ? '' : String(shard),
        drainMs:
          allMarks || this.#stop.signal.aborted || this.#options.drainMs === Number.POSITIVE_INFINITY
            ? ''
            : String(this.#options.drainMs),
        allMarks: allMarks ? '1' : '0',
      }),
    ) as Promise<AppReadReply>;
  }

  /**
   * A session read of one moment (see the file's header): `load(from)` reads
   * the session and its shard's outbox from position `from` ('' for the
   * shard's own floor); undefined when the session is missing.
   *
   * The first attempt reads both slots at once. Later ones read the app slot
   * before the shard (its mark can then be above the shard's last position
   * only if the shard lost positions), and again after it when the shard's
   * floor is above the first mark (a slow read: entries were applied and
   * removed in between; the second mark can be below the floor only if the
   * app slot lost marks). Only such proof leads to a repair. `round` counts
   * the reads made again because a catch-up was done meanwhile (see the end).
   */
  async read<T>(
    operation: string,
    call: StoreCall | undefined,
    appName: string,
    keys: ShardKeys,
    load: (from: string) => Promise<ShardRead<T> | undefined>,
    round = 1,
  ): Promise<{ result: T; appState: string[] } | undefined> {
    const { shard } = keys;
    // Both at once; the shard read starts from the mark this store last saw.
    const known = this.#marks.get(slotId(appName, shard));
    const appRead = this.readApp(operation, call, appName, shard);
    appRead.catch(() => {});
    const first = await load(known === undefined ? '' : String(known)).catch(async (error: unknown) => {
      await appRead.catch(() => {});
      throw error;
    });
    if (first === undefined) {
      await appRead.catch(() => {});
      return undefined;
    }
    let app = await appRead;
    let shardRead: ShardRead<T> = first;
    for (let attempt = 2; !oneMoment(shardRead.view, app.mark); attempt++) {
      if (attempt > READ_ATTEMPTS) {
        this.#options.warn({
          code: 'read-not-one-moment',
          appName,
          shard,
          message: `a session read met writes of shard ${shard} between its reads ${READ_ATTEMPTS} times; it shows the app state of its last read, which may hold app: writes of appends it does not show`,
        });
        break;
      }
      const before = await this.readApp(operation, call, appName, shard);
      const again = await load(String(before.mark));
      if (again === undefined) return undefined;
      shardRead = again;
      app = before;
      const { view } = again;
      if (oneMoment(view, before.mark)) break;
      if (before.mark > view.last) {
        // Read before the shard, the mark is above every position the shard gave: the shard lost
        // positions (a failover), or the mark was changed outside the store. It is lowered to what
        // the shard was told is applied, and the entries above that caught up, in one script: each
        // only to the keys whose value was made before it, as the mark may or may not have covered
        // it (applied before the shard lost positions or the mark was changed; or made since, and
        // taken for applied).
        const lowered = await this.#lower({ operation, call, appName, shard, mark: before.mark, view });
        if (lowered === 'changed') {
          // Another reader lowered it first: this read's app read is of the mark before.
          if (round < READ_ATTEMPTS) return this.read(operation, call, appName, keys, load, round + 1);
          this.#options.warn({
            code: 'read-not-one-moment',
            appName,
            shard,
            message: `a session read found the app slot's mark of shard ${shard} changed under its repair ${READ_ATTEMPTS} times; it shows the app state of its last read, which may lack app: writes of appends it shows`,
          });
        } else if (lowered !== undefined) {
          // Every entry of this read's shard read is applied: the bucket after is of its moment.
          return { result: again.result, appState: lowered };
        }
        break;
      }
      const after = await this.readApp(operation, call, appName, shard);
      app = after;
      if (oneMoment(view, after.mark)) break;
      if (after.mark < view.floor) {
        // Read after the shard, the mark is below entries the shard removed as applied: the app slot lost marks.
        await this.#repair({ operation, call, appName, shard, mark: after.mark, view });
        break;
      }
    }
    const shown = await this.shown(operation, call, appName, shard, shardRead.view, app);
    if (shown === AGAIN) {
      if (round < READ_ATTEMPTS) return this.read(operation, call, appName, keys, load, round + 1);
      return { result: shardRead.result, appState: layOver(app.bucket, app.mark, shardRead.view) };
    }
    return { result: shardRead.result, appState: shown };
  }

  /**
   * The app state a read of one moment shows: the app slot's bucket and
   * mark (`app`, read with the shard's `view`, `oneMoment`), with the
   * entries above the mark laid over it. Applies those entries first
   * (writes in flight, or whose writer died): the read has its answer
   * already, and a failure here leaves them to a writer or a drain.
   *
   * Entries the shard was told were applied are above the mark when the app
   * read is older than that (a slow read: laying them over shows one moment),
   * or when the app slot lost them (a failover, a damaged mark). The apply
   * (this one, or another reader's or a drain's before it) catches lost ones
   * up only to the keys whose value was made before each (see APPLY), and
   * says how far the shard's entries were caught up: when that covers them,
   * laying them over this read's bucket could show a lost value over a newer
   * one, so the read shows the bucket as the catch-up left it, if no later
   * entry of the shard (an append this read does not show) was applied
   * since; else it must read again ({@link AGAIN}: the catch-up is done, and
   * the next read's mark is above the entries it covered). So are entries at
   * or below what a lowering of the mark took back (made while the mark
   * covered them, see APPLY), and entries applied late (made `lateUs` or
   * more before the apply: a writer that died between its steps, see
   * APPLY), which the read cannot tell apart on its own clock: the apply
   * returns the bucket when it caught one up, and says so when another did
   * before it.
   */
  async shown(
    operation: string,
    call: StoreCall | undefined,
    appName: string,
    shard: number,
    view: OutboxView,
    app: { bucket: string[]; mark: number; lowered: number },
  ): Promise<string[] | typeof AGAIN> {
    const { mark } = app;
    if (!view.entries.some(([position]) => position > mark)) return app.bucket;
    const caughtUpTo = Math.max(view.known, app.lowered);
    const known = view.entries.some(([position]) => position > mark && position <= caughtUpTo);
    const outcome = await this.apply(operation, call, appName, shard, view, {
      wantBucket: known || 'caught',
      waited: UNWAITED,
    }).catch(() => undefined);
    let highest = -1;
    if (outcome) {
      for (const [position] of view.entries) if (position > mark && position <= outcome.caughtUp) highest = position;
    }
    if (outcome && highest >= 0) {
      const lastEntry = view.entries[view.entries.length - 1]?.[0];
      if (outcome.bucket && outcome.mark === lastEntry) return outcome.bucket;
      return AGAIN;
    }
    return layOver(app.bucket, mark, view);
  }

  /**
   * Raises an app mark found below the entries the shard removed as applied
   * (the app slot lost them) and says so; a repair that cannot be written
   * (the server refuses writes) is reported too, and the read answers all
   * the same.
   */
  async #repair(disagreement: Disagreement): Promise<void> {
    try {
      await this.#raiseLost(disagreement);
    } catch (error) {
      const { appName, shard, mark, view } = disagreement;
      this.#failedRepair(
        'app-mark-behind',
        appName,
        shard,
        `${appMarkBehind(shard, mark, view.floor)}; raising it`,
        error,
      );
    }
  }

  /** Raises an app mark below the view's floor to it and says so (see {@link repair}); rejects when the raise fails. */
  async #raiseLost({ operation, call, appName, shard, mark, view }: Disagreement): Promise<void> {
    await this.#raise(operation, call, appKeys(this.#options.prefix, appName).marks, String(shard), view.floor);
    this.#options.warn({
      code: 'app-mark-behind',
      appName,
      shard,
      message: `${appMarkBehind(shard, mark, view.floor)}; the mark was raised, the lost app: writes stay lost`,
    });
  }

  /** Reports an apply's own lowering of a mark (the apply's `state` for the shard 2 or 3; else nothing). */
  #lowered(appName: string, shard: number, state: number): void {
    if (state !== 2 && state !== 3) return;
    this.#reportLowering(
      appName,
      shard,
      state === 3,
      `the app slot's mark of shard ${shard} was none of the shard's positions, passed by its later entries`,
    );
  }

  /**
   * Reports a lowering of the app slot's mark of `shard` (by a read's apply or
   * any other's): `found` says what was found, `ahead` that the mark was more
   * than {@link MARK_AHEAD_US} ahead of the app slot's clock, `to` (when
   * known) where it went.
   */
  #reportLowering(appName: string, shard: number, ahead: boolean, found: string, to?: number): void {
    const where = to === undefined ? '' : ` ${to},`;
    this.#options.warn({
      code: ahead ? 'app-mark-ahead' : 'shard-position-behind',
      appName,
      shard,
      message: `${found}: ${
        ahead
          ? `the mark is more than ${MARK_AHEAD_US / 1e6} s ahead of the app slot's clock (changed outside the store?)`
          : 'the shard lost writes that were applied to the app slot (a failover to a replica that lagged?), or the mark was changed outside the store'
      }; the mark was lowered to${where} the last position the shard was told is applied, and the entries above it caught up`,
    });
  }

  /** Reports a repair that could not be written (`what` names it); the read answers all the same. */
  #failedRepair(code: RedisStoreWarning['code'], appName: string, shard: number, what: string, error: unknown): void {
    const reason = error instanceof Error ? error.message : String(error);
    this.#options.warn({
      code,
      appName,
      shard,
      cause: error,
      message: `${what} failed (${reason}), the next read tries again`,
    });
  }

  /**
   * Lowers an app mark found above every position the shard gave (`mark`,
   * read before the shard's `view`) to the last position the shard was told
   * is applied, and catches up the view's entries above that, in one apply
   * (no entry lies between the two positions: the shard gave none above its
   * last); says so. Resolves with the bucket after, 'changed' when the mark
   * had changed meanwhile (another reader lowered it), or undefined when the
   * apply failed (reported; the next read tries again).
   */
  async #lower(
    { operation, call, appName, shard, mark, view }: Disagreement,
    wantBucket = true,
  ): Promise<string[] | 'changed' | undefined> {
    const to = Math.max(view.known, view.floor);
    const behind = `shard ${shard}'s last outbox position (${view.last}) is below the app slot's mark (${mark})`;
    try {
      // Every entry of the view at or below the old mark is a catch-up.
      const outcome = await this.apply(
        operation,
        call,
        appName,
        shard,
        { ...view, known: Math.max(view.known, mark) },
        {
          wantBucket,
          waited: UNWAITED,
          lower: { from: mark, to },
        },
      );
      if (outcome.lowered === 0) return 'changed';
      this.#reportLowering(appName, shard, outcome.lowered === 2, behind, to);
      return outcome.bucket;
    } catch (error) {
      // A drain stopped by close(): the next read or drain tries again, as ever. A mark further
      // ahead than clocks differ (this process's clock here, the app slot's had the lowering run)
      // was changed outside the store, and is named so.
      const code = mark > Date.now() * 1000 + MARK_AHEAD_US ? 'app-mark-ahead' : 'shard-position-behind';
      if (!this.#stop.signal.aborted) this.#failedRepair(code, appName, shard, `${behind}; lowering it`, error);
      return undefined;
    }
  }

  #raise(operation: string, call: StoreCall | undefined, hash: string, field: string, value: number) {
    return this.#run(
      operation,
      false,
      call,
      RAISE,
      keyList(RAISE, { hash }),
      argList(RAISE, { field, value: String(value) }),
    );
  }

  #startDrain(appName: string, marks: Map<number, number>): void {
    const running = this.#drain(appName, marks).catch((error: unknown) => {
      if (this.#stop.signal.aborted) return;
      this.#options.warn({
        code: 'drain-failed',
        appName,
        cause: error,
        message: `a drain of the app's outboxes did not finish (the next one is due in ${this.#options.drainMs} ms): ${error instanceof Error ? error.message : String(error)}`,
      });
    });
    this.#track(running);
  }

  /**
   * Applies what every shard's outbox of the app holds, then tells the
   * shards that had entries how far that went. Harmless beside writers doing
   * the same: the app slot skips what it has. A shard that cannot be read
   * keeps its entries for the next drain; the others are applied all the
   * same, and the drain then fails naming it.
   *
   * The app slot's marks are read before the shards (by the read that
   * claimed the drain, or here), so a mark above every position its shard
   * gave is proof, as for a session read: the shard lost positions, or the
   * mark was changed outside the store. It is lowered and the shard's
   * entries caught up as a session read does (see {@link read}), so the
   * app's writes that the mark made look applied reach the app state within
   * a drain's interval, with no session read of that shard.
   */
  async drain(appName: string): Promise<void> {
    // Without the marks (the app slot cannot be read) the drain applies what the shards hold all the
    // same, lowering nothing: an entry waiting fails at its apply, which says so; with none, there
    // is nothing to do.
    const marks = await this.#readApp('drain', undefined, appName, undefined, true).then(
      ([, , , all]) => shardMarks(all),
      () => new Map<number, number>(),
    );
    await this.#drain(appName, marks);
  }

  async #drain(appName: string, marksBefore: Map<number, number>): Promise<void> {
    const signal = AbortSignal.any([this.#stop.signal, AbortSignal.timeout(DRAIN_TIMEOUT_MS)]);
    const call: StoreCall = { signal, deadline: Date.now() + DRAIN_TIMEOUT_MS };
    // Every command in flight listens to the signal: allow one listener per shard.
    setMaxListeners(this.#options.shards + 16, signal);
    const shards: ShardKeys[] = [];
    for (let shard = 0; shard < this.#options.shards; shard++) {
      shards.push(shardKeys(this.#options.prefix, appName, shard, this.#options.shards));
    }
    const peek = async (keys: ShardKeys) => {
      const ack = this.pendingAck(appName, keys.shard);
      const reply = await this.#run(
        'drain',
        true,
        call,
        PEEK,
        keyList(PEEK, keys),
        argList(PEEK, { ack, from: '', keepUs: this.#options.keepUs }),
        UNWAITED,
      );
      this.delivered(appName, keys.shard, ack);
      return this.view(reply as OutboxReply, appName, keys.shard);
    };
    const read = await Promise.allSettled(shards.map(peek));
    const failures: unknown[] = [];
    // Every shard with entries, or that was told of applies: the app slot may have lost those
    // since (a failover), which the apply finds (its floor is above the mark) and catches up.
    const pending: Array<{ keys: ShardKeys; view: OutboxView }> = [];
    // Read before the shard, the mark is above every position the shard gave (see `read`).
    const ahead: Array<{ keys: ShardKeys; view: OutboxView }> = [];
    read.forEach((outcome, index) => {
      const keys = shards[index] as ShardKeys;
      if (outcome.status === 'rejected') failures.push(outcome.reason);
      else if ((marksBefore.get(keys.shard) ?? -1) > outcome.value.last) ahead.push({ keys, view: outcome.value });
      else if (outcome.value.entries.length > 0 || outcome.value.floor >= 0)
        pending.push({ keys, view: outcome.value });
    });
    await Promise.all(
      ahead.map(({ keys, view }) => {
        const mark = marksBefore.get(keys.shard) as number;
        return this.#lower({ operation: 'drain', call, appName, shard: keys.shard, mark, view }, false);
      }),
    );
    // The shards to tell how far the app slot applied them.
    const tell = [...ahead];
    if (pending.length > 0) {
      const app: AppKeys = appKeys(this.#options.prefix, appName);
      const [marks] = (await this.#run(
        'drain',
        true,
        call,
        APPLY,
        keyList(APPLY, { appState: app.appState, marks: app.marks, written: app.written }),
        argList(
          APPLY,
          { wantBucket: '0', lateUs: this.#options.lateUs, ...NO_LOWERING },
          pending.flatMap(({ keys, view }) => group(keys.shard, view)),
        ),
        UNWAITED,
      )) as [Array<string | number>, number];
      const behind: Array<{ keys: ShardKeys; view: OutboxView }> = [];
      for (let index = 0; index < marks.length; index += 4) {
        const shard = Number(marks[index]);
        const state = Number(marks[index + 2]);
        if (state === 1) {
          const entry = pending.find(({ keys }) => keys.shard === shard);
          if (entry) behind.push(entry);
        } else {
          this.#lowered(appName, shard, state);
          this.#learn(appName, shard, String(marks[index + 1]));
        }
      }
      // A shard whose view the app slot is behind (it lost marks): apply it on its own, from the mark.
      for (const { keys, view } of behind) {
        await this.apply('drain', call, appName, keys.shard, view, { wantBucket: false, waited: UNWAITED }).catch(
          (error: unknown) => failures.push(error),
        );
      }
      tell.push(...pending.filter((entry) => entry.view.entries.length > 0 || behind.includes(entry)));
    }
    const told = await Promise.allSettled(tell.map(({ keys }) => peek(keys)));
    for (const outcome of told) if (outcome.status === 'rejected') failures.push(outcome.reason);
    if (failures.length > 0) {
      const first = failures[0];
      throw new Error(
        `${failures.length} shard request(s) failed, the first: ${first instanceof Error ? first.message : String(first)}`,
        { cause: first },
      );
    }
  }

  /**
   * Stops starting drains and timers, hands over the marks not yet handed
   * over, lets the running work finish for up to {@link CLOSE_WAIT_MS}, then
   * abandons it.
   */
  async close(): Promise<void> {
    for (const [id, timer] of this.#flushes) {
      clearTimeout(timer);
      this.#flushes.delete(id);
      const cut = id.indexOf('#');
      this.#handOver(id.slice(cut + 1), Number(id.slice(0, cut)));
    }
    await settledWithin(CLOSE_WAIT_MS, Promise.all([...this.#drains]));
    this.#stop.abort();
    await Promise.all([...this.#drains]);
  }
}

/** The APPLY arguments of one shard's entries: its number, the view's floor and known position, the count, then the entries. */
function group(shard: number, view: OutboxView): string[] {
  const out = [String(shard), String(view.floor), String(view.known), String(view.entries.length)];
  for (const [position, delta] of view.entries) out.push(String(position), delta);
  return out;
}

function slotId(appName: string, shard: number): string {
  return `${shard}#${appName}`;
}

/** `READ_APP`'s reply: bucket, mark, claimed, the shards' marks (or 0), what a lowering took back. */
type AppReadReply = [string[], string, number | string, string[] | number, string | undefined];

/** What a read or an apply found the two slots disagree on: the app slot's mark of `shard`, and the shard's outbox. */
interface Disagreement {
  operation: string;
  call: StoreCall | undefined;
  appName: string;
  shard: number;
  mark: number;
  view: OutboxView;
}

/** The shards' marks as `READ_APP` gives them (shard, mark, ...: positions only; 0 for none read). */
function shardMarks(list: string[] | number): Map<number, number> {
  const marks = new Map<number, number>();
  if (!Array.isArray(list)) return marks;
  for (let index = 0; index + 1 < list.length; index += 2) marks.set(Number(list[index]), Number(list[index + 1]));
  return marks;
}

/** The fixed arguments of an apply that lowers no mark. */
const NO_LOWERING = { lowerShard: '', lowerFrom: '', lowerTo: '' } as const;

/** {@link Outbox.shown}'s answer when the read must be made again. */
export const AGAIN = Symbol('read again');

/** What an `app-mark-behind` warning says before what the repair did. */
function appMarkBehind(shard: number, mark: number, floor: number): string {
  return `the app slot's mark of shard ${shard} (${mark}) is below entries the shard removed as applied (up to ${floor}): the app slot lost applied writes (a failover to a replica that lagged?)`;
}

/** Sets `id` in a map kept to {@link ACK_MEMORY} entries (the oldest goes first). */
function remember<V>(map: Map<string, V>, id: string, value: V): void {
  map.delete(id);
  map.set(id, value);
  if (map.size > ACK_MEMORY) map.delete(map.keys().next().value as string);
}
