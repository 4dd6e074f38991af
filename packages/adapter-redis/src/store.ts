/**
 * The Redis store: translates the persistence contract of `@adk-state/core`
 * to the server-side scripts of `scripts.ts` over the key layout of
 * `keys.ts`. Values, state keys and events are kept as the JSON text core
 * hands over, and handed back unchanged.
 *
 * On one server (and for an app kept in one slot) every operation is one
 * script, one round trip: the app bucket is written and read by the same
 * script as the session ("direct"). On a Redis Cluster with an app spread
 * over several slots, `app:` deltas travel through the shard's outbox
 * (`outbox.ts`): a write with `app:` keys, and a session read, are then two
 * requests.
 */

import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { InvalidArgumentError } from '@adk-state/core';
import type {
  AppendInput,
  AppendResult,
  Bucket,
  CreateInput,
  CreateResult,
  EventFilter,
  ExpiryClock,
  HeldSession,
  ImportInput,
  ImportResult,
  ListQuery,
  ListResult,
  LoadResult,
  SessionKey,
  SessionRecord,
  SessionStore,
  SinceResult,
  StoreCall,
  StoredEvent,
  StoredSessionKey,
} from '@adk-state/core/store';
import { UnreadableDataError, unreadableText } from '@adk-state/core/store';
import { listAppNames, listSessionKeys } from './apps.js';
import { afterWrite, type CommandClient, Connection, type ReplicaWait } from './connection.js';
import {
  type AppKeys,
  appKeys,
  decodeText,
  encodeText,
  FIELD,
  layoutKey,
  REVISION_FIELD,
  SEPARATOR,
  type SessionKeys,
  type ShardKeys,
  sessionKeys,
  shardKeys,
  UPDATED_FIELD,
  userKeys,
} from './keys.js';
import { AGAIN, layOver, Outbox, type OutboxReply, oneMoment, type RedisStoreWarning, type Runner } from './outbox.js';
import {
  APPEND,
  APPLY,
  argList,
  CREATE,
  DELETE,
  FETCH,
  foreignKeyMessage,
  IMPORT,
  keyList,
  LAYOUT,
  LIST,
  LIST_SHARDS,
  LOAD,
  PEEK,
  RAISE,
  READ_APP,
  READ_BUCKET,
  runScript,
  type Script,
  UNREADABLE_HEAD,
  UNREADABLE_LOG,
} from './scripts.js';
import { quietWarnings } from './warnings.js';

const scripts: readonly Script[] = [
  CREATE,
  APPEND,
  APPLY,
  IMPORT,
  LOAD,
  DELETE,
  LIST,
  LIST_SHARDS,
  FETCH,
  READ_BUCKET,
  READ_APP,
  PEEK,
  RAISE,
  LAYOUT,
];

/** What {@link RedisStore} needs besides a client. */
export interface RedisStoreOptions {
  /** Put in front of every key; must not contain `{` or `}` (checked by the service). */
  keyPrefix: string;
  /** The time to live of a session and its events, on its clock, in milliseconds; none when absent. */
  expiry?: { clock: ExpiryClock; ms: number };
  /** How many slots the users of one app are spread over (1: the whole app in one slot). Default 1. */
  shards?: number;
  /**
   * Keep every script within one hash slot (the outbox protocol for `app:`
   * keys) even on a client that is not a `Cluster`: for a server behind one
   * address that enforces slots. Default: true for a `Cluster`, else false.
   */
  clusterProtocol?: boolean;
  /** The least time between two drains of an app's outboxes (cluster protocol), in milliseconds. Default 5,000. */
  drainMs?: number;
  /** How long an outbox keeps entries known applied (cluster protocol), in milliseconds. Default {@link DEFAULT_OUTBOX_KEEP_MS}. */
  outboxKeepMs?: number;
  /**
   * How long after it was made an outbox entry's apply is a catch-up (cluster protocol), in
   * milliseconds: it lands only on the keys whose value was made before it. Default {@link DEFAULT_CATCH_UP_AFTER_MS}.
   */
  catchUpAfterMs?: number;
  /** Called with what the store repaired or could not do in the background. Default: `process.emitWarning`. */
  onWarning?: (warning: RedisStoreWarning) => void;
  /** Every write waits for this many replicas to acknowledge it (`WAIT`); a shortfall fails the call with `mayHaveApplied: true`. */
  waitForReplicas?: ReplicaWait;
  /** Called by {@link RedisStore.close}; releases a client the service created itself. */
  release?: () => Promise<void>;
  /**
   * True when the client was created for this store (from `url`): the store
   * then listens for its `error` and `ready` events for as long as it lives.
   * A client passed in only gets a `ready` listener while a command waits in
   * its offline queue.
   */
  ownsClient?: boolean;
}

/** The SHA1 of each script the store runs (for tests and tooling, e.g. `SCRIPT EXISTS`). */
export const SCRIPT_SHAS: Readonly<Record<string, string>> = Object.fromEntries(
  scripts.map((entry) => [entry.name, entry.sha]),
);

/** The default least time between two drains of an app's outboxes, in milliseconds. */
export const DEFAULT_DRAIN_MS = 5_000;

/**
 * How long an outbox keeps the entries known applied, by default: longer
 * than a failover of the app slot's master with Redis's default
 * `cluster-node-timeout` (15 s), so that applies the new master lacks are
 * applied again from the outbox.
 */
export const DEFAULT_OUTBOX_KEEP_MS = 60_000;

/**
 * How long after an `app:` write was made its apply to the app slot is a
 * catch-up (cluster protocol), in milliseconds: a second step that comes
 * this late (its writer died between the steps, it was held past a failover
 * of the app slot, or the app slot lost it before its shard was told) lands
 * only on the keys whose value was made before it. Longer than a write's
 * two steps take, shorter than a failover.
 */
export const DEFAULT_CATCH_UP_AFTER_MS = 1_000;

/** `catchUpAfterMs` as `APPLY` takes it: microseconds, as text; `Infinity` past every position (nothing comes late). */
function lateUs(ms: number): string {
  return Number.isFinite(ms) ? String(Math.round(ms * 1000)) : '99999999999999999';
}

/** How many sessions' keys {@link RedisStore} keeps at hand. */
const KEY_CACHE_SIZE = 1_024;

/** The app arguments of a direct write: its pairs go into the bucket, nothing into an outbox. */
const DIRECT_TAIL = { mode: 'd', appDelta: '', ack: '', keepUs: '0' } as const;

/** How a write passes its app delta: the pairs for the bucket (direct), and the last arguments of its script. */
interface AppArguments {
  count: number;
  pairs: Bucket | undefined;
  tail: { mode: string; appDelta: string; ack: string; keepUs: string };
}

/** The data under a key prefix was written with another number of shards than the service was given. */
export class RedisLayoutError extends InvalidArgumentError {
  /** The number of shards recorded under the key prefix. */
  readonly recordedShards: number;
  /** The number of shards the service was given. */
  readonly requestedShards: number;

  constructor(prefix: string, recorded: number, requested: number) {
    super(
      'shards',
      `the keys under keyPrefix ${JSON.stringify(prefix)} are laid out for shards: ${recorded}, and this service has shards: ${requested} (with another number it would read and write other keys than the data's); pass shards: ${recorded}`,
    );
    this.name = 'RedisLayoutError';
    this.recordedShards = recorded;
    this.requestedShards = requested;
  }
}

/** The reply of {@link LOAD}: session hash, user bucket, app bucket or outbox view, log entries. */
type LoadReply = [string[], string[], string[] | OutboxReply, string[], number | string];

export class RedisStore implements SessionStore {
  readonly backend = 'redis';
  readonly #connection: Connection;
  readonly #client: CommandClient;
  readonly #wait: ReplicaWait | undefined;
  readonly #prefix: string;
  /** The expiry arguments of every write: `ttlMs` (0 for none) and `clock`. */
  readonly #expiry: { ttlMs: number; clock: ExpiryClock };
  readonly #shards: number;
  /** True when every operation is one script (one server, or the app in one slot). */
  readonly #direct: boolean;
  /** True when a script may only touch one slot (listing an app takes one script per shard). */
  readonly #slotBound: boolean;
  /** Recently used sessions' keys (insertion order; the oldest goes first when full). */
  readonly #keyCache = new Map<string, SessionKeys>();
  /** The write scripts' key lists of the cached sessions' keys. */
  readonly #writeKeyLists = new WeakMap<SessionKeys, string[]>();
  readonly #release: (() => Promise<void>) | undefined;
  readonly #outbox: Outbox;
  /** How long outboxes keep applied entries, in microseconds, as the scripts take it. */
  readonly #keepUs: string;
  /** Settles once the layout record agrees with `shards` (undefined: not checked yet, or the check failed). */
  #layout: Promise<void> | undefined;
  #layoutChecked = false;

  constructor(client: CommandClient, options: RedisStoreOptions) {
    this.#connection = new Connection(client, options.ownsClient === true);
    this.#client = client;
    this.#wait = options.waitForReplicas;
    this.#prefix = options.keyPrefix;
    this.#expiry = { ttlMs: options.expiry?.ms ?? 0, clock: options.expiry?.clock ?? 'idle' };
    this.#shards = options.shards ?? 1;
    this.#slotBound = options.clusterProtocol ?? client.isCluster === true;
    this.#direct = this.#shards === 1 || !this.#slotBound;
    this.#release = options.release;
    this.#keepUs = String(Math.round((options.outboxKeepMs ?? DEFAULT_OUTBOX_KEEP_MS) * 1000));
    const warn = options.onWarning ?? emitWarning;
    this.#outbox = new Outbox(this.#run, {
      prefix: this.#prefix,
      shards: this.#shards,
      drainMs: options.drainMs ?? DEFAULT_DRAIN_MS,
      keepUs: this.#keepUs,
      lateUs: lateUs(options.catchUpAfterMs ?? DEFAULT_CATCH_UP_AFTER_MS),
      warn: quietWarnings(warn),
    });
  }

  /** `direct` (one script per operation) or `outbox` (app: deltas through the shards' outboxes). */
  get protocol(): 'direct' | 'outbox' {
    return this.#direct ? 'direct' : 'outbox';
  }

  /**
   * Applies what every outbox of the app holds now (cluster protocol; a
   * no-op otherwise). Drains also run by themselves (see `outbox.ts`).
   */
  async drainApp(appName: string): Promise<void> {
    if (!this.#direct) await this.#outbox.drain(appName);
  }

  async createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult> {
    if (!this.#layoutChecked) await this.#checkLayout('createSession', call);
    const keys = this.#keys(input.key);
    const appDelta = input.appDelta;
    const app = this.#appArguments(input.key.appName, keys.shard, appDelta);
    const creating = this.#run(
      'createSession',
      true,
      call,
      CREATE,
      this.#writeKeys(keys),
      this.#newSessionArguments(keys, input.createTime, input.revision, input.state, input.userDelta, app),
    );
    if (this.#direct) {
      const reply = await creating;
      if (!Array.isArray(reply)) return { status: 'exists' };
      const [user, app] = reply as [string[], string[]];
      return { status: 'created', userState: toBucket(user), appState: toBucket(app) };
    }
    // Outbox: with an app delta, apply it (the bucket comes back); else read the app slot at the same time.
    const appRead =
      appDelta.size > 0 ? undefined : this.#outbox.readApp('createSession', call, input.key.appName, keys.shard);
    appRead?.catch(() => {});
    const reply = await creating.catch(async (error: unknown) => {
      await appRead?.catch(() => {});
      throw error;
    });
    this.#outbox.delivered(input.key.appName, keys.shard, app.tail.ack);
    if (!Array.isArray(reply)) {
      await appRead?.catch(() => {});
      return { status: 'exists' };
    }
    // The session is stored: whatever fails from here fails the call as a write that may have been applied.
    return afterWrite('createSession', () =>
      this.#createdApp(input, keys.shard, reply as [string[], OutboxReply], appRead, call),
    );
  }

  /** The outbox's part of a create that stored its session: the app state it answers with. */
  async #createdApp(
    input: CreateInput,
    shard: number,
    [user, outbox]: [string[], OutboxReply],
    appRead: ReturnType<Outbox['readApp']> | undefined,
    call: StoreCall | undefined,
  ): Promise<CreateResult> {
    const view = this.#outbox.view(outbox, input.key.appName, shard);
    let app: string[];
    if (appRead) {
      const read = await appRead;
      // As a session read shows it (entries above the mark applied, and a catch-up's bucket shown);
      // when the app read and the create straddle writes of the shard, or a catch-up asks for another
      // read, the new session is read as getSession reads it.
      const shown = oneMoment(view, read.mark)
        ? await this.#outbox.shown('createSession', call, input.key.appName, shard, view, read)
        : AGAIN;
      if (shown === AGAIN) {
        const again = await this.#load(input.key, { limit: 0 }, undefined, call);
        if (again) return { status: 'created', userState: again.userState, appState: again.appState };
        app = layOver(read.bucket, read.mark, view);
      } else {
        app = shown;
      }
    } else {
      app =
        (await this.#outbox.apply('createSession', call, input.key.appName, shard, view, { wantBucket: true }))
          .bucket ?? [];
    }
    return { status: 'created', userState: toBucket(user), appState: toBucket(app) };
  }

  /**
   * The outbox's second step after a write that stored its entry (an append,
   * an import): the shard's entries in `reply` applied to the app slot. The
   * write is made, so a failure here says it may have been applied.
   */
  #applyWritten(
    operation: string,
    call: StoreCall | undefined,
    appName: string,
    shard: number,
    reply: OutboxReply,
  ): Promise<void> {
    return afterWrite(operation, () =>
      this.#outbox
        .apply(operation, call, appName, shard, this.#outbox.view(reply, appName, shard), { wantBucket: false })
        .then(() => undefined),
    );
  }

  /** The whole session in one script: record, buckets, every event in order, lastUpdateTime; atomic. */
  async importSession(input: ImportInput, call?: StoreCall): Promise<ImportResult> {
    if (!this.#layoutChecked) await this.#checkLayout('importSession', call);
    const keys = this.#keys(input.key);
    const events: string[] = [String(input.events.length)];
    for (const event of input.events) events.push(encodeEntry(event), encodeText(event.id));
    const app = this.#appArguments(input.key.appName, keys.shard, input.appDelta);
    const reply = await this.#run('importSession', true, call, IMPORT, this.#writeKeys(keys), [
      ...this.#newSessionArguments(keys, input.lastUpdateTime, input.revision, input.state, input.userDelta, app),
      ...events,
    ]);
    this.#outbox.delivered(input.key.appName, keys.shard, app.tail.ack);
    if (reply === 0 || reply === '0') return { status: 'exists' };
    if (Array.isArray(reply)) {
      await this.#applyWritten('importSession', call, input.key.appName, keys.shard, reply as OutboxReply);
    }
    return { status: 'imported' };
  }

  async loadSession(key: SessionKey, filter: EventFilter, call?: StoreCall): Promise<LoadResult | undefined> {
    return this.#load(key, filter, undefined, call);
  }

  /** The whole log for a reader that holds its first events: only the later ones, in the same one read. */
  loadSessionSince(key: SessionKey, held: HeldSession, call?: StoreCall): Promise<SinceResult | undefined> {
    return this.#load(key, {}, held, call) as Promise<SinceResult | undefined>;
  }

  async #load(
    key: SessionKey,
    filter: EventFilter,
    held: HeldSession | undefined,
    call: StoreCall | undefined,
  ): Promise<LoadResult | SinceResult | undefined> {
    if (!this.#layoutChecked) await this.#checkLayout('getSession', call);
    const keys = this.#keys(key);
    const { afterTimestamp: after, limit } = filter;
    const loadKeys = keyList(LOAD, {
      session: keys.session,
      events: keys.events,
      userState: keys.userState,
      app: this.#direct ? keys.app.appState : keys.outbox,
      eventIds: keys.eventIds,
    });
    const bounds = {
      afterTimestamp: after === undefined ? '' : String(after),
      limit: limit === undefined ? '' : String(limit),
      mode: this.#direct ? 'd' : 'o',
      heldEvents: held ? String(held.events) : '',
      heldRevision: held ? String(held.revision) : '',
      heldMark: held ? held.logMark : '',
      heldLast: held?.lastEventId === undefined ? '' : encodeText(held.lastEventId),
      heldEntry: heldEntryArgument(held),
    };
    const load = async (from: string) => {
      const reply = await this.#run('getSession', false, call, LOAD, loadKeys, argList(LOAD, { ...bounds, from }));
      return reply === 0 ? 0 : loadReply(reply as [string, string[]], this.#direct);
    };
    if (this.#direct) {
      const reply = await load('');
      return reply === 0 ? undefined : loaded(key, reply, reply[2] as string[], held !== undefined);
    }
    const read = await this.#outbox.read('getSession', call, key.appName, keys, async (from) => {
      const reply = await load(from);
      return reply === 0
        ? undefined
        : { result: reply, view: this.#outbox.view(reply[2] as OutboxReply, key.appName, keys.shard) };
    });
    return read === undefined ? undefined : loaded(key, read.result, read.appState, held !== undefined);
  }

  async appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult> {
    if (!this.#layoutChecked) await this.#checkLayout('appendEvent', call);
    const keys = this.#keys(input.key);
    const app = this.#appArguments(input.key.appName, keys.shard, input.appDelta);
    const args = argList(
      APPEND,
      {
        expectedRevision: String(input.expectedRevision),
        updateTime: String(input.lastUpdateTime),
        entry: encodeEntry(input.event),
        eventIdField: encodeText(input.event.id),
        nSession: input.sessionDelta.size,
        nUser: input.userDelta.size,
        nApp: app.count,
        ...this.#writeTail(keys),
        ...app.tail,
      },
      pairs(input.sessionDelta, input.userDelta, app.pairs),
    );
    const reply = await this.#run('appendEvent', true, call, APPEND, this.#writeKeys(keys), args);
    if (reply !== UNREADABLE_HEAD && reply !== UNREADABLE_LOG) {
      this.#outbox.delivered(input.key.appName, keys.shard, app.tail.ack);
    }
    if (Array.isArray(reply)) {
      await this.#applyWritten('appendEvent', call, input.key.appName, keys.shard, reply as OutboxReply);
      return { status: 'ok' };
    }
    if (reply === 0) return { status: 'ok' };
    if (reply === -1) return { status: 'missing' };
    if (reply === UNREADABLE_HEAD || reply === UNREADABLE_LOG) {
      throw new UnreadableDataError(
        reply === UNREADABLE_HEAD
          ? `the stored head of session ${JSON.stringify(input.key.sessionId)} has no revision, or one that is not a whole number`
          : `the log of session ${JSON.stringify(input.key.sessionId)} has no entry at the position recorded for event ${JSON.stringify(input.event.id)}`,
      );
    }
    if (typeof reply === 'string' && DECIMAL.test(reply)) return { status: 'stale', revision: Number(reply) };
    // Not an answer the script gives: whether it wrote is unknown.
    throw new Error(`appendEvent: the append script answered ${JSON.stringify(reply)}, which it never does`);
  }

  /**
   * How a write passes its app delta: as pairs into the bucket (direct), or
   * as one JSON text into the outbox with the mark learned for the shard.
   */
  #appArguments(appName: string, shard: number, appDelta: Bucket): AppArguments {
    if (this.#direct) {
      return { count: appDelta.size, pairs: appDelta, tail: DIRECT_TAIL };
    }
    const ack = this.#outbox.pendingAck(appName, shard);
    return {
      count: 0,
      pairs: undefined,
      tail: {
        mode: 'o',
        appDelta: appDelta.size === 0 ? '' : JSON.stringify(pairs(appDelta)),
        ack,
        keepUs: this.#keepUs,
      },
    };
  }

  /**
   * The arguments the create and import scripts share: the listed time, the
   * revision, the three bucket sizes, the expiry, index members and app
   * delta, then the field/value pairs of the session, user and app buckets.
   */
  #newSessionArguments(
    keys: SessionKeys,
    updateTime: number,
    revision: number,
    session: Bucket,
    user: Bucket,
    app: AppArguments,
  ): Array<string | number> {
    return argList(
      CREATE,
      {
        updateTime: String(updateTime),
        revision: String(revision),
        life: randomBytes(12).toString('base64url'),
        nSession: session.size,
        nUser: user.size,
        nApp: app.count,
        ...this.#writeTail(keys),
        ...app.tail,
      },
      pairs(session, user, app.pairs),
    );
  }

  /** The arguments every write ends its fixed ones with: the expiry, and the session's members in the indexes. */
  #writeTail(keys: SessionKeys) {
    return {
      ttlMs: this.#expiry.ttlMs,
      clock: this.#expiry.clock,
      appMember: keys.appMember,
      userMember: keys.userMember,
      expiryMember: keys.expiryMember,
    };
  }

  /**
   * The KEYS of the create, import and append scripts (which declare the
   * same ones): the app bucket (direct) or the shard's outbox last. Made once
   * per cached session's keys.
   */
  #writeKeys(keys: SessionKeys): string[] {
    let list = this.#writeKeyLists.get(keys);
    if (list === undefined) {
      list = keyList(APPEND, { ...keys, app: this.#direct ? keys.app.appState : keys.outbox });
      this.#writeKeyLists.set(keys, list);
    }
    return list;
  }

  async deleteSession(key: SessionKey, call?: StoreCall): Promise<void> {
    if (!this.#layoutChecked) await this.#checkLayout('deleteSession', call);
    const keys = this.#keys(key);
    await this.#run('deleteSession', true, call, DELETE, keyList(DELETE, keys), argList(DELETE, keys));
  }

  async listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult> {
    if (!this.#layoutChecked) await this.#checkLayout('listSessions', call);
    const app = appKeys(this.#prefix, query.appName);
    if (query.userId === undefined && this.#shards > 1) return this.#listShards(query, app, call);
    const shard: ShardKeys =
      query.userId === undefined
        ? shardKeys(this.#prefix, query.appName, 0, 1)
        : userKeys(this.#prefix, query.appName, query.userId, this.#shards);
    const user =
      query.userId === undefined ? undefined : userKeys(this.#prefix, query.appName, query.userId, this.#shards);
    const listKeys = keyList(LIST, {
      index: user ? user.userIndex : shard.shardIndex,
      expiry: shard.expiry,
      shardIndex: shard.shardIndex,
      appState: this.#direct ? app.appState : undefined,
    });
    const listing = this.#run(
      'listSessions',
      false,
      call,
      LIST,
      listKeys,
      argList(LIST, {
        order: query.order,
        offset: String(query.offset),
        limit: query.limit === undefined ? '' : String(query.limit),
        encodedUser: user ? user.encodedUser : '',
      }),
    );
    const appRead = this.#direct ? undefined : this.#readApp('listSessions', call, query.appName);
    appRead?.catch(() => {});
    const reply = JSON.parse((await listing) as string) as [
      number | string,
      Array<[string, ListedHash, (number | string)?]>,
      Array<[string, ListedHash]>,
      string[] | number,
    ];
    const [total, rows, users, appState] = reply;
    const sessions: SessionRecord[] = [];
    for (const [member, hash, score] of listOf(rows)) {
      if (gone(hash)) continue;
      let sessionId: string;
      let userId: string;
      if (query.userId === undefined) {
        const cut = member.indexOf(SEPARATOR);
        sessionId = decodeText(member.slice(0, cut));
        userId = decodeText(member.slice(cut + 1));
      } else {
        sessionId = decodeText(member);
        userId = query.userId;
      }
      sessions.push(this.#listedRecord({ appName: query.appName, userId, sessionId }, hash, Number(score)));
    }
    const userStates = new Map<string, Bucket>();
    for (const [encodedUser, hash] of listOf(users)) {
      const userId = decodeText(encodedUser);
      userStates.set(userId, this.#listedBucket(query.appName, userId, hash));
    }
    const appFlat = typeof appState === 'object' ? listOf(appState) : ((await appRead) as string[]);
    return { totalItems: Number(total), sessions, userStates, appState: toBucket(appFlat) };
  }

  /**
   * An app's sessions over every shard: each shard's count and first
   * `offset + limit` members in order (one call on a single server, one per
   * shard on a cluster, all at once), merged here into the window, then the
   * window's hashes and user buckets, and the app bucket, at once.
   */
  async #listShards(query: ListQuery, app: AppKeys, call: StoreCall | undefined): Promise<ListResult> {
    const shards: ShardKeys[] = [];
    for (let shard = 0; shard < this.#shards; shard++) {
      shards.push(shardKeys(this.#prefix, query.appName, shard, this.#shards));
    }
    const want = query.limit === undefined ? '' : String(query.offset + query.limit);
    const groups = this.#slotBound ? shards.map((shard) => [shard]) : [shards];
    // Each command in flight listens to the call's abort signal: allow one listener per shard.
    if (call?.signal && this.#slotBound) setMaxListeners(this.#shards + 16, call.signal);
    const appRead = this.#direct
      ? this.#readBucket('listSessions', call, app.appState)
      : this.#readApp('listSessions', call, query.appName);
    appRead.catch(() => {});
    const replies = await Promise.all(
      groups.map((group) =>
        this.#run(
          'listSessions',
          false,
          call,
          LIST_SHARDS,
          group.flatMap((shard) => [shard.shardIndex, shard.expiry]),
          argList(LIST_SHARDS, { order: query.order, want }),
        ),
      ),
    );
    let total = 0;
    const candidates: Array<{ member: string; score: number; session: string; user: string; shard: number }> = [];
    let shard = 0;
    for (const reply of replies) {
      for (const [count, scored] of reply as Array<[number | string, string[]]>) {
        total += Number(count);
        for (let index = 0; index < scored.length; index += 2) {
          const member = scored[index] as string;
          const cut = member.indexOf(SEPARATOR);
          candidates.push({
            member,
            score: Number(scored[index + 1]),
            session: decodeText(member.slice(0, cut)),
            user: decodeText(member.slice(cut + 1)),
            shard,
          });
        }
        shard++;
      }
    }
    const descending = query.order === 'desc';
    candidates.sort((a, b) => {
      if (a.score !== b.score) return descending ? b.score - a.score : a.score - b.score;
      if (a.session !== b.session) return a.session < b.session ? -1 : 1;
      return a.user < b.user ? -1 : a.user > b.user ? 1 : 0;
    });
    const end = query.limit === undefined ? candidates.length : query.offset + query.limit;
    const page = candidates.slice(query.offset, end);
    const byShard = new Map<number, string[]>();
    for (const entry of page) {
      const members = byShard.get(entry.shard) ?? [];
      members.push(entry.member);
      byShard.set(entry.shard, members);
    }
    const fetchGroups = this.#slotBound
      ? [...byShard.keys()].map((index) => [index])
      : byShard.size > 0
        ? [[...byShard.keys()]]
        : [];
    const fetched = await Promise.all(
      fetchGroups.map((group) =>
        this.#run(
          'listSessions',
          false,
          call,
          FETCH,
          group.map((index) => (shards[index] as ShardKeys).shardIndex),
          group.flatMap((index) => {
            const members = byShard.get(index) as string[];
            return [String(members.length), ...members];
          }),
        ),
      ),
    );
    const hashes = new Map<string, ListedHash>();
    const userStates = new Map<string, Bucket>();
    for (const reply of fetched) {
      for (const [rows, users] of reply as Array<[Array<[string, ListedHash]>, Array<[string, ListedHash]>]>) {
        for (const [member, hash] of rows) hashes.set(member, hash);
        for (const [encodedUser, hash] of users) {
          const userId = decodeText(encodedUser);
          userStates.set(userId, this.#listedBucket(query.appName, userId, hash));
        }
      }
    }
    const sessions: SessionRecord[] = [];
    for (const entry of page) {
      const hash = hashes.get(entry.member);
      if (hash === undefined || gone(hash)) continue;
      const key = { appName: query.appName, userId: entry.user, sessionId: entry.session };
      sessions.push(this.#listedRecord(key, hash, entry.score));
    }
    return { totalItems: total, sessions, userStates, appState: toBucket((await appRead) as string[]) };
  }

  async readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket> {
    if (!this.#layoutChecked) await this.#checkLayout('getUserState', call);
    const keys = userKeys(this.#prefix, appName, userId, this.#shards);
    return toBucket((await this.#readBucket('getUserState', call, keys.userState)) as string[]);
  }

  async readAppState(appName: string, call?: StoreCall): Promise<Bucket> {
    if (!this.#layoutChecked) await this.#checkLayout('getAppState', call);
    if (!this.#direct) return toBucket(await this.#readApp('getAppState', call, appName));
    return toBucket((await this.#readBucket('getAppState', call, appKeys(this.#prefix, appName).appState)) as string[]);
  }

  /** The apps that have keys under the key prefix (a SCAN of every key; on a Cluster, of every master). */
  listAppNames(call?: StoreCall): Promise<string[]> {
    return listAppNames(this.#client, this.#prefix, { signal: call?.signal });
  }

  /**
   * Every session of the app (of one user, when given), read from the names
   * of the session hashes (a SCAN of the app's keys; on a Cluster, of every
   * master): a session whose entries in the listing's sorted sets were
   * removed outside adk-state is found too.
   */
  listSessionKeys(appName: string, userId: string | undefined, call?: StoreCall): Promise<StoredSessionKey[]> {
    return listSessionKeys(this.#client, this.#prefix, appName, userId, { signal: call?.signal });
  }

  async close(): Promise<void> {
    await this.#outbox.close();
    await this.#release?.();
  }

  #readBucket(operation: string, call: StoreCall | undefined, key: string): Promise<unknown> {
    return this.#run(operation, false, call, READ_BUCKET, keyList(READ_BUCKET, { bucket: key }), []);
  }

  /** The app bucket through the outbox protocol (which may start a drain). */
  async #readApp(operation: string, call: StoreCall | undefined, appName: string): Promise<string[]> {
    return (await this.#outbox.readApp(operation, call, appName, undefined)).bucket;
  }

  /**
   * Checks once per store that the layout recorded under the key prefix has
   * this store's number of shards (recording it when nothing is recorded):
   * a service with another number would read and write other keys. A failed
   * check is tried again by the next call; a disagreement fails every call.
   */
  #checkLayout(operation: string, call: StoreCall | undefined): Promise<void> {
    // A read on a prefix with no layout yet records none (there is nothing to read): it asks again next time.
    if (!LAYOUT_WRITES.has(operation) && this.#layout === undefined) return this.#readLayout(operation, call, false);
    this.#layout ??= this.#readLayout(operation, call, true).catch((error: unknown) => {
      if (!(error instanceof RedisLayoutError)) this.#layout = undefined;
      throw error;
    });
    return this.#layout;
  }

  /** Checks the layout recorded under the prefix against this service's; when `record`, records it if none is. */
  async #readLayout(operation: string, call: StoreCall | undefined, record: boolean): Promise<void> {
    const recorded = await this.#run(
      operation,
      false,
      call,
      LAYOUT,
      keyList(LAYOUT, { layout: layoutKey(this.#prefix) }),
      argList(LAYOUT, { shards: String(this.#shards), record: record ? '1' : '' }),
    );
    if (recorded === '') return;
    if (Number(recorded) !== this.#shards) throw new RedisLayoutError(this.#prefix, Number(recorded), this.#shards);
    this.#layoutChecked = true;
  }

  /**
   * Runs one script for one store call (see `connection.ts` for deadlines and
   * honest failures); `operation` names the call in errors as the service does.
   */
  readonly #run: Runner = (operation, write, call, target, keys, args, waited = true) => {
    const step = { operation, write, call };
    const wait = write && waited ? this.#wait : undefined;
    return runScript(
      (command, commandArgs) => this.#connection.send(step, command, commandArgs, wait),
      target,
      keys,
      args,
    );
  };

  /**
   * A listed session's record. One whose head is not a hash (written outside
   * adk-state) has its index's lastUpdateTime and a state the service cannot
   * read: the service lists it with its user's and app's state, and warns.
   */
  #listedRecord(key: SessionKey, head: ListedHash, score: number): SessionRecord {
    if (typeof head !== 'string') return toRecord(key, listOf(head));
    const { appName, userId, sessionId } = key;
    const at = sessionKeys(this.#prefix, appName, userId, sessionId, this.#shards).session;
    return { id: sessionId, appName, userId, lastUpdateTime: score, revision: 0, state: foreignBucket(at, head) };
  }

  /** A listed user bucket: one whose key is not a hash reads as unreadable (the service lists without it, and warns). */
  #listedBucket(appName: string, userId: string, hash: ListedHash): Bucket {
    if (typeof hash !== 'string') return toBucket(listOf(hash));
    return foreignBucket(userKeys(this.#prefix, appName, userId, this.#shards).userState, hash);
  }

  /**
   * The keys of a session, from a small cache of the sessions used last:
   * an agent appends to the same session turn after turn, and building the
   * keys (encoding, shard hash, eight key strings) is work on every call.
   */
  #keys(key: SessionKey): SessionKeys {
    // Lengths first, so that no two different (app, user, session) triples share a cache key.
    const id = `${key.appName.length}:${key.userId.length}:${key.appName}${key.userId}${key.sessionId}`;
    let keys = this.#keyCache.get(id);
    if (keys === undefined) {
      keys = Object.freeze(sessionKeys(this.#prefix, key.appName, key.userId, key.sessionId, this.#shards));
      if (this.#keyCache.size >= KEY_CACHE_SIZE) this.#keyCache.delete(this.#keyCache.keys().next().value as string);
      this.#keyCache.set(id, keys);
    }
    return keys;
  }
}

/** A store warning on Node's warning channel. */
function emitWarning(warning: RedisStoreWarning): void {
  process.emitWarning(`adk-state redis (app ${JSON.stringify(warning.appName)}): ${warning.message}`, {
    type: 'AdkStateRedisWarning',
    code: warning.code,
  });
}

/**
 * A loaded session from the reply of {@link LOAD} and the app state of the
 * same moment; with `since`, a {@link SinceResult} (the reply says whether
 * the log was sent whole).
 */
function loaded(key: SessionKey, reply: LoadReply, appState: string[], since: boolean): LoadResult | SinceResult {
  const [session, user, , entries, restart] = reply;
  const mark = logMark(session);
  const result: LoadResult = {
    session: toRecord(key, session),
    userState: toBucket(user),
    appState: toBucket(appState),
    events: entries.map(decodeEntry),
    ...(mark === undefined ? {} : { logMark: mark }),
  };
  return since ? { ...result, restart: Number(restart) === 1 } : result;
}

/**
 * The session's log mark, as {@link LOAD} builds it to compare: its life,
 * and after a `/` the mark of its last write in place, if it had one.
 */
function logMark(session: string[]): string | undefined {
  const life = fieldOf(session, FIELD.life);
  if (life === undefined) return undefined;
  const rewritten = fieldOf(session, FIELD.rewritten);
  return rewritten === undefined ? life : `${life}/${rewritten}`;
}

/**
 * The reply of {@link LOAD}: its head (the hashes and the restart flag, one
 * JSON text) parsed, with its empty lists as lists, beside the log entries.
 */
function loadReply([text, events]: [string, string[]], direct: boolean): LoadReply {
  const [session, user, app, restart] = JSON.parse(text) as [string[], string[], unknown, number];
  return [
    listOf(session),
    listOf(user),
    direct ? listOf(app as string[]) : outboxView(app as OutboxReply),
    events,
    restart,
  ];
}

/** An outbox view of a JSON reply, its entries as a list. */
function outboxView([last, floor, entries, known]: OutboxReply): OutboxReply {
  return [last, floor, listOf(entries), known];
}

/** A list of a script's JSON reply: Lua's JSON encoder writes an empty table as `{}`. */
function listOf<T>(value: T[] | Record<string, never>): T[] {
  return Array.isArray(value) ? value : [];
}

/** A field's value in a flat HGETALL reply. */
function fieldOf(flat: readonly string[], field: string): string | undefined {
  for (let index = 0; index < flat.length; index += 2) if (flat[index] === field) return flat[index + 1];
  return undefined;
}

/** Buckets as field/value arguments, one after the other, fields encoded. */
function pairs(...buckets: Array<Bucket | undefined>): string[] {
  const out: string[] = [];
  for (const bucket of buckets) {
    if (bucket !== undefined) for (const [field, text] of bucket) out.push(encodeText(field), text);
  }
  return out;
}

/** A flat HGETALL reply of a bucket hash as a bucket. */
function toBucket(flat: readonly string[]): Bucket {
  const bucket: Bucket = new Map();
  for (let index = 0; index < flat.length; index += 2) {
    bucket.set(decodeText(flat[index] as string), flat[index + 1] as string);
  }
  return bucket;
}

/** A revision as the scripts write it: decimal digits. */
const DECIMAL = /^\d+$/;

/**
 * A listed session's head or user bucket as the listing scripts answer it:
 * its fields and values (an empty one as `{}`, from Lua's JSON encoder), or
 * the name of the type its key holds instead of a hash.
 */
type ListedHash = string[] | Record<string, never> | string;

/** A listed head that is no longer there (the session was deleted or expired meanwhile). */
function gone(head: ListedHash): boolean {
  return typeof head !== 'string' && listOf(head).length === 0;
}

/** A bucket the service cannot read: its key holds `type` where a hash belongs. */
function foreignBucket(key: string, type: string): Bucket {
  return new Map([['', unreadableText(foreignKeyMessage(key, type, 'hash'))]]);
}

/** A flat HGETALL reply of a session hash as a record. */
function toRecord(key: SessionKey, flat: readonly string[]): SessionRecord {
  const state: Bucket = new Map();
  // Left NaN when missing: the service refuses such a head as unreadable.
  let revision = Number.NaN;
  let lastUpdateTime = Number.NaN;
  for (let index = 0; index < flat.length; index += 2) {
    const field = flat[index] as string;
    const value = flat[index + 1] as string;
    if (field === REVISION_FIELD) revision = DECIMAL.test(value) ? Number(value) : Number.NaN;
    else if (field === UPDATED_FIELD) lastUpdateTime = value.trim() === '' ? Number.NaN : Number(value);
    else if (!field.startsWith(SEPARATOR)) state.set(decodeText(field), value);
  }
  return { id: key.sessionId, appName: key.appName, userId: key.userId, lastUpdateTime, revision, state };
}

/** The calls that record the layout of a prefix that has none: the writes (a read records nothing). */
const LAYOUT_WRITES: ReadonlySet<string> = new Set(['createSession', 'importSession', 'appendEvent', 'deleteSession']);

/** The read script's `heldEntry`: the held copy's last entry, when core passed its stored form. */
function heldEntryArgument(held: HeldSession | undefined): string {
  const last = held?.lastEvent;
  return last === undefined || last.id !== held?.lastEventId ? '' : encodeEntry(last);
}

/**
 * One log entry: `<timestamp> <id as JSON>\n<event JSON>`. JSON text never
 * holds a raw line break, so the first one ends the header; the timestamp
 * leads so the load script can read it without parsing the event.
 */
function encodeEntry(event: StoredEvent): string {
  return `${String(event.timestamp)} ${JSON.stringify(event.id)}\n${event.json}`;
}

function decodeEntry(entry: string): StoredEvent {
  const space = entry.indexOf(' ');
  const newline = entry.indexOf('\n', space);
  const timestamp = Number(entry.slice(0, space));
  let id: unknown;
  try {
    id = JSON.parse(entry.slice(space + 1, newline));
  } catch {
    id = undefined;
  }
  if (space <= 0 || newline < 0 || !Number.isFinite(timestamp) || typeof id !== 'string') {
    throw new UnreadableDataError(
      `a log entry is not <timestamp> <id as JSON> and the event: ${JSON.stringify(entry.slice(0, 60))}`,
    );
  }
  return { timestamp, id, json: entry.slice(newline + 1) };
}
