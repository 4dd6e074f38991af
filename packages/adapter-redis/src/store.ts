/**
 * The Redis store: translates the persistence contract of `@adk-state/core`
 * to one server-side script per operation (see `scripts.ts` for the scripts
 * and `keys.ts` for the key layout). Values, state keys and events are kept
 * as the JSON text core hands over, and handed back unchanged.
 */

import { setMaxListeners } from 'node:events';
import { BackendError } from '@adk-state/core';
import type {
  AppendInput,
  AppendResult,
  Bucket,
  CreateInput,
  CreateResult,
  EventFilter,
  ExpiryClock,
  ImportInput,
  ImportResult,
  ListQuery,
  ListResult,
  LoadResult,
  SessionKey,
  SessionRecord,
  SessionStore,
  StoreCall,
  StoredEvent,
} from '@adk-state/core/store';
import { type CommandClient, Connection } from './connection.js';
import {
  type AppKeys,
  appKeys,
  decodeText,
  encodeText,
  REVISION_FIELD,
  SEPARATOR,
  type SessionKeys,
  type ShardKeys,
  sessionKeys,
  shardKeys,
  UPDATED_FIELD,
  userKeys,
} from './keys.js';
import {
  APPEND,
  APPLY,
  argList,
  CREATE,
  DELETE,
  FETCH,
  IMPORT,
  keyList,
  LIST,
  LIST_SHARDS,
  LOAD,
  READ_APP,
  READ_BUCKET,
  runScript,
  type Script,
} from './scripts.js';

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
];

/** What {@link RedisStore} needs besides a client. */
export interface RedisStoreOptions {
  /** Put in front of every key; must not contain `{` or `}` (checked by the service). */
  keyPrefix: string;
  /** The time to live of a session and its events, on its clock, in milliseconds; none when absent. */
  expiry?: { clock: ExpiryClock; ms: number };
  /** How many slots the users of one app are spread over (1: the whole app in one slot). Default 1. */
  shards?: number;
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

/** How many sessions the store remembers as "pending app deltas applied up to revision n", to clear on its next call. */
const APPLIED_MEMORY = 10_000;

/** How many times getSession reads before it gives up on finding one moment (only under constant writes). */
const MAX_READ_ATTEMPTS = 8;

/** How many sessions' keys {@link RedisStore} keeps at hand. */
const KEY_CACHE_SIZE = 1_024;

type Pending = string[];

export class RedisStore implements SessionStore {
  readonly backend = 'redis';
  readonly #connection: Connection;
  readonly #prefix: string;
  /** The expiry arguments of every write: `ttlMs` (0 for none) and `clock`. */
  readonly #expiry: { ttlMs: number; clock: ExpiryClock };
  readonly #shards: number;
  /** Recently used sessions' keys (insertion order; the oldest goes first when full). */
  readonly #keyCache = new Map<string, SessionKeys>();
  readonly #cluster: boolean;
  readonly #release: (() => Promise<void>) | undefined;
  /** Pending hash key -> the revision up to which its app deltas are known applied (this store applied them). */
  readonly #applied = new Map<string, number>();

  constructor(client: CommandClient, options: RedisStoreOptions) {
    this.#connection = new Connection(client, options.ownsClient === true);
    this.#prefix = options.keyPrefix;
    this.#expiry = { ttlMs: options.expiry?.ms ?? 0, clock: options.expiry?.clock ?? 'idle' };
    this.#shards = options.shards ?? 1;
    this.#cluster = client.isCluster === true;
    this.#release = options.release;
  }

  async createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult> {
    const keys = this.#keys(input.key);
    const creating = this.#run(
      'createSession',
      true,
      call,
      CREATE,
      writeKeys(keys),
      this.#newSessionArguments(keys, input.createTime, input.revision, input.state, input.userDelta, input.appDelta),
    );
    // With no app delta and the app bucket in a slot of its own, read that bucket at the same time.
    const appRead =
      keys.sameSlot || input.appDelta.size > 0 ? undefined : this.#readBucket('createSession', call, keys.app.appState);
    appRead?.catch(() => {});
    const reply = await creating;
    if (!Array.isArray(reply)) return { status: 'exists' };
    const [user, app, pending] = reply as [string[], string[] | number, Pending];
    const appState = Array.isArray(app)
      ? app
      : appRead
        ? ((await appRead) as string[])
        : await this.#settle('createSession', call, keys, String(input.revision), pending, true);
    return { status: 'created', userState: toBucket(user), appState: toBucket(appState as string[]) };
  }

  /** The whole session in one script: record, buckets, every event in order, lastUpdateTime; atomic. */
  async importSession(input: ImportInput, call?: StoreCall): Promise<ImportResult> {
    const keys = this.#keys(input.key);
    const events: string[] = [String(input.events.length)];
    for (const event of input.events) events.push(encodeEntry(event), encodeText(event.id));
    const reply = await this.#run('importSession', true, call, IMPORT, writeKeys(keys), [
      ...this.#newSessionArguments(
        keys,
        input.lastUpdateTime,
        input.revision,
        input.state,
        input.userDelta,
        input.appDelta,
      ),
      ...events,
    ]);
    if (!Array.isArray(reply)) return { status: 'exists' };
    const [pending] = reply as [Pending];
    await this.#settle('importSession', call, keys, String(input.revision), pending, false);
    return { status: 'imported' };
  }

  async loadSession(key: SessionKey, filter: EventFilter, call?: StoreCall): Promise<LoadResult | undefined> {
    const keys = this.#keys(key);
    let after = filter.afterTimestamp;
    let limit = filter.limit;
    // Infinite bounds are settled here: nothing is <= -Infinity, everything is <= +Infinity.
    if (after === Number.NEGATIVE_INFINITY) after = undefined;
    if (after === Number.POSITIVE_INFINITY) {
      after = undefined;
      limit = 0;
    }
    const loadKeys = keyList(LOAD, {
      session: keys.session,
      events: keys.events,
      userState: keys.userState,
      pending: keys.pending,
      appState: keys.sameSlot ? keys.app.appState : undefined,
    });
    const bounds = {
      afterTimestamp: after === undefined ? '' : String(after),
      limit: limit === undefined ? '' : String(limit),
    };
    const load = async () =>
      (await this.#run(
        'getSession',
        false,
        call,
        LOAD,
        loadKeys,
        argList(LOAD, { ...bounds, appliedUpTo: this.#takeApplied(keys) }),
      )) as LoadReply | 0;
    if (keys.sameSlot) {
      // One script reads everything, app bucket included: one moment.
      const reply = await load();
      return reply === 0 ? undefined : loaded(key, reply, reply[2] as string[]);
    }
    // The app bucket has a slot of its own; the app delta of a write lands there in a second step.
    // A view is of one moment when the app bucket holds exactly this session's deltas up to some
    // revision w (its watermark) and the pending record still holds every later one up to the
    // session's revision: those are laid over the bucket. Else it is read again, the app first.
    for (let attempt = 1; ; attempt++) {
      const appRead = this.#run(
        'getSession',
        false,
        call,
        READ_APP,
        keyList(READ_APP, { appState: keys.app.appState, watermarks: keys.app.watermarks }),
        argList(READ_APP, { pair: keys.pair }),
      ) as Promise<[string[], string]>;
      appRead.catch(() => {});
      // The first time both go at once (on one server in this order); then the app bucket is read first.
      if (attempt > 1) await appRead;
      const reply = await load().catch(async (error: unknown) => {
        await appRead.catch(() => {});
        throw error;
      });
      if (reply === 0) {
        await appRead.catch(() => {});
        return undefined;
      }
      const [bucket, watermark] = await appRead;
      const view = this.#appView(keys, reply, bucket, watermark);
      if (view.settle.length > 0) {
        // A write of this session is between its two steps, or died there: roll its app delta forward.
        await this.#settle('getSession', call, keys, view.first, view.settle, false, false);
      }
      if (view.state) return loaded(key, reply, view.state);
      if (attempt >= MAX_READ_ATTEMPTS) {
        throw new Error(`could not read a session and its app state at one moment in ${attempt} attempts; try again`);
      }
    }
  }

  /**
   * The app state a session read shows, from the app bucket and the
   * session's watermark read beside it: undefined when the two are not of one
   * moment (the bucket has a delta of this session newer than the session
   * read, or one the pending record has already forgotten). `settle` holds
   * the pending deltas the bucket did not have yet.
   */
  #appView(
    keys: SessionKeys,
    reply: LoadReply,
    bucket: string[],
    watermark: string,
  ): { state: string[] | undefined; first: string; settle: Pending } {
    const [session, , , , pending] = reply;
    const first = fieldOf(session, FIRST_FIELD) ?? '';
    const revision = Number(fieldOf(session, REVISION_FIELD));
    const forgotten = Number(fieldOf(session, FORGOTTEN_FIELD) ?? -1);
    const cut = watermark.indexOf(':');
    const applied = cut > 0 && watermark.slice(0, cut) === first ? Number(watermark.slice(cut + 1)) : -1;
    const later: Array<[number, string]> = [];
    for (let index = 0; index < pending.length; index += 2) {
      const at = Number(pending[index]);
      if (at > applied) later.push([at, pending[index + 1] as string]);
    }
    const settle = later.flat().map(String);
    if (later.length === 0 && pending.length > 0) this.#remember(keys.pending, applied);
    if (applied > revision || forgotten > applied) return { state: undefined, first, settle };
    if (later.length === 0) return { state: bucket, first, settle };
    const state = new Map<string, string>();
    for (let index = 0; index < bucket.length; index += 2)
      state.set(bucket[index] as string, bucket[index + 1] as string);
    later.sort((a, b) => a[0] - b[0]);
    for (const [, delta] of later) {
      const fields = JSON.parse(delta) as string[];
      for (let index = 0; index < fields.length; index += 2)
        state.set(fields[index] as string, fields[index + 1] as string);
    }
    return { state: [...state].flat(), first, settle };
  }

  async appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult> {
    const keys = this.#keys(input.key);
    const args = argList(
      APPEND,
      {
        expectedRevision: String(input.expectedRevision),
        updateTime: String(input.lastUpdateTime),
        entry: encodeEntry(input.event),
        eventIdField: encodeText(input.event.id),
        nSession: input.sessionDelta.size,
        nUser: input.userDelta.size,
        nApp: input.appDelta.size,
        ...this.#writeTail(keys),
        appliedUpTo: this.#takeApplied(keys),
      },
      [...pairs(input.sessionDelta), ...pairs(input.userDelta), ...pairs(input.appDelta)],
    );
    const reply = await this.#run('appendEvent', true, call, APPEND, writeKeys(keys), args);
    if (Array.isArray(reply)) {
      const [first, pending] = reply as [string, Pending];
      await this.#settle('appendEvent', call, keys, first, pending, false);
      return { status: 'ok' };
    }
    const code = Number(reply);
    if (code === 0) return { status: 'ok' };
    if (code === -1) return { status: 'missing' };
    return { status: 'stale', revision: code };
  }

  /**
   * The second step of a write whose app delta went to the pending record
   * (or of a read that met one): the pending deltas applied to the app slot,
   * idempotently, in revision order. Once this resolves they are known
   * applied; the session's next call through this store clears them.
   * A failure here comes after the first step was applied, so a write
   * reports that it may have been applied whatever the cause.
   */
  async #settle(
    operation: string,
    call: StoreCall | undefined,
    keys: SessionKeys,
    first: string,
    pending: Pending,
    wantBucket: boolean,
    write = true,
    forget = false,
  ): Promise<string[]> {
    if (pending.length === 0) {
      if (!wantBucket) return [];
      return (await this.#readBucket(operation, call, keys.app.appState)) as string[];
    }
    const ordered: Array<[number, string]> = [];
    for (let index = 0; index < pending.length; index += 2) {
      ordered.push([Number(pending[index]), pending[index + 1] as string]);
    }
    ordered.sort((a, b) => a[0] - b[0]);
    const args = argList(
      APPLY,
      { pair: keys.pair, first, wantBucket: wantBucket ? '1' : '0', forget: forget ? '1' : '0' },
      ordered.flatMap(([revision, delta]) => [String(revision), delta]),
    );
    try {
      const reply = await this.#run(
        operation,
        true,
        call,
        APPLY,
        keyList(APPLY, { appState: keys.app.appState, watermarks: keys.app.watermarks }),
        args,
      );
      if (!forget) this.#remember(keys.pending, (ordered[ordered.length - 1] as [number, string])[0]);
      return Array.isArray(reply) ? (reply as string[]) : [];
    } catch (error) {
      if (!write && !(error instanceof BackendError)) throw error;
      const cause = error instanceof BackendError ? error.cause : error;
      throw new BackendError(operation, cause, {
        mayHaveApplied: write,
        timedOut: error instanceof BackendError && error.timedOut,
      });
    }
  }

  #remember(pendingKey: string, revision: number): void {
    this.#applied.delete(pendingKey);
    this.#applied.set(pendingKey, revision);
    if (this.#applied.size > APPLIED_MEMORY) {
      const oldest = this.#applied.keys().next().value as string;
      this.#applied.delete(oldest);
    }
  }

  /** The revision up to which this session's pending app deltas are known applied ('' for none), forgotten once handed to a script. */
  #takeApplied(keys: SessionKeys): string {
    if (keys.sameSlot) return '';
    const revision = this.#applied.get(keys.pending);
    if (revision === undefined) return '';
    this.#applied.delete(keys.pending);
    return String(revision);
  }

  /**
   * The arguments the create and import scripts share: the listed time, the
   * revision, the three bucket sizes, the expiry and index members, then the
   * field/value pairs of the session, user and app buckets.
   */
  #newSessionArguments(
    keys: SessionKeys,
    updateTime: number,
    revision: number,
    session: Bucket,
    user: Bucket,
    app: Bucket,
  ): Array<string | number> {
    return argList(
      CREATE,
      {
        updateTime: String(updateTime),
        revision: String(revision),
        nSession: session.size,
        nUser: user.size,
        nApp: app.size,
        ...this.#writeTail(keys),
      },
      [...pairs(session), ...pairs(user), ...pairs(app)],
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

  async deleteSession(key: SessionKey, call?: StoreCall): Promise<void> {
    const keys = this.#keys(key);
    this.#applied.delete(keys.pending);
    const reply = (await this.#run(
      'deleteSession',
      true,
      call,
      DELETE,
      keyList(DELETE, keys),
      argList(DELETE, keys),
    )) as [string, Pending];
    if (keys.sameSlot) return;
    const [first, pending] = reply;
    if (first === '') return;
    // Roll forward what a dead writer left, and drop the session's watermark in the app slot.
    await this.#settle(
      'deleteSession',
      call,
      keys,
      first,
      pending.length > 0 ? pending : ['-1', '[]'],
      false,
      true,
      true,
    );
  }

  async listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult> {
    const app = appKeys(this.#prefix, query.appName);
    if (query.userId === undefined && this.#shards > 1) return this.#listShards(query, app, call);
    const shard: ShardKeys =
      query.userId === undefined
        ? shardKeys(this.#prefix, query.appName, 0, 1)
        : userKeys(this.#prefix, query.appName, query.userId, this.#shards);
    const user =
      query.userId === undefined ? undefined : userKeys(this.#prefix, query.appName, query.userId, this.#shards);
    const sameSlot = this.#shards === 1;
    const listKeys = keyList(LIST, {
      index: user ? user.userIndex : shard.shardIndex,
      expiry: shard.expiry,
      shardIndex: shard.shardIndex,
      appState: sameSlot ? app.appState : undefined,
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
    const appRead = sameSlot ? undefined : this.#readBucket('listSessions', call, app.appState);
    appRead?.catch(() => {});
    const reply = (await listing) as [
      number | string,
      Array<[string, string[]]>,
      Array<[string, string[]]>,
      string[] | number,
    ];
    const [total, rows, users, appState] = reply;
    const sessions: SessionRecord[] = [];
    for (const [member, hash] of rows) {
      if (hash.length === 0) continue;
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
      sessions.push(toRecord({ appName: query.appName, userId, sessionId }, hash));
    }
    const userStates = new Map<string, Bucket>();
    for (const [encodedUser, hash] of users) userStates.set(decodeText(encodedUser), toBucket(hash));
    const appFlat = Array.isArray(appState) ? appState : ((await appRead) as string[]);
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
    const groups = this.#cluster ? shards.map((shard) => [shard]) : [shards];
    // Each command in flight listens to the call's abort signal: allow one listener per shard.
    if (call?.signal && this.#cluster) setMaxListeners(this.#shards + 16, call.signal);
    const appRead = this.#readBucket('listSessions', call, app.appState);
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
    const fetchGroups = this.#cluster
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
    const hashes = new Map<string, string[]>();
    const userStates = new Map<string, Bucket>();
    for (const reply of fetched) {
      for (const [rows, users] of reply as Array<[Array<[string, string[]]>, Array<[string, string[]]>]>) {
        for (const [member, hash] of rows) hashes.set(member, hash);
        for (const [encodedUser, hash] of users) userStates.set(decodeText(encodedUser), toBucket(hash));
      }
    }
    const sessions: SessionRecord[] = [];
    for (const entry of page) {
      const hash = hashes.get(entry.member);
      if (!hash || hash.length === 0) continue;
      sessions.push(toRecord({ appName: query.appName, userId: entry.user, sessionId: entry.session }, hash));
    }
    return { totalItems: total, sessions, userStates, appState: toBucket((await appRead) as string[]) };
  }

  async readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket> {
    const keys = userKeys(this.#prefix, appName, userId, this.#shards);
    return toBucket((await this.#readBucket('getUserState', call, keys.userState)) as string[]);
  }

  async readAppState(appName: string, call?: StoreCall): Promise<Bucket> {
    const keys = appKeys(this.#prefix, appName);
    return toBucket((await this.#readBucket('getAppState', call, keys.appState)) as string[]);
  }

  async close(): Promise<void> {
    await this.#release?.();
  }

  #readBucket(operation: string, call: StoreCall | undefined, key: string): Promise<unknown> {
    return this.#run(operation, false, call, READ_BUCKET, keyList(READ_BUCKET, { bucket: key }), []);
  }

  /**
   * Runs one script for one store call (see `connection.ts` for deadlines and
   * honest failures); `operation` names the call in errors as the service does.
   */
  #run(
    operation: string,
    write: boolean,
    call: StoreCall | undefined,
    target: Script,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
  ): Promise<unknown> {
    const step = { operation, write, call };
    return runScript((command, commandArgs) => this.#connection.send(step, command, commandArgs), target, keys, args);
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

/** The session hash field of the first revision. */
const FIRST_FIELD = '\u0000c';

/** The session hash field of the highest revision whose pending app delta was forgotten (known applied). */
const FORGOTTEN_FIELD = '\u0000k';

/** The reply of {@link LOAD}: session hash, user bucket, app bucket (or 0: its own slot), log entries, pending deltas. */
type LoadReply = [string[], string[], string[] | number, string[], Pending];

/** A loaded session from the reply of {@link LOAD} and the app bucket of the same moment. */
function loaded(key: SessionKey, reply: LoadReply, appState: string[]): LoadResult {
  const [session, user, , entries] = reply;
  return {
    session: toRecord(key, session),
    userState: toBucket(user),
    appState: toBucket(appState),
    events: entries.map(decodeEntry),
  };
}

/** A field's value in a flat HGETALL reply. */
function fieldOf(flat: readonly string[], field: string): string | undefined {
  for (let index = 0; index < flat.length; index += 2) if (flat[index] === field) return flat[index + 1];
  return undefined;
}

/** The keys of the create, import and append scripts (the app bucket only when it shares the slot). */
function writeKeys(keys: SessionKeys): string[] {
  return keyList(CREATE, { ...keys, appState: keys.sameSlot ? keys.app.appState : undefined });
}

/** A bucket as field/value arguments, fields encoded. */
function pairs(bucket: Bucket): string[] {
  const out: string[] = [];
  for (const [field, text] of bucket) out.push(encodeText(field), text);
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

/** A flat HGETALL reply of a session hash as a record. */
function toRecord(key: SessionKey, flat: readonly string[]): SessionRecord {
  const state: Bucket = new Map();
  let revision = 0;
  let lastUpdateTime = 0;
  for (let index = 0; index < flat.length; index += 2) {
    const field = flat[index] as string;
    const value = flat[index + 1] as string;
    if (field === REVISION_FIELD) revision = Number(value);
    else if (field === UPDATED_FIELD) lastUpdateTime = Number(value);
    else if (!field.startsWith(SEPARATOR)) state.set(decodeText(field), value);
  }
  return { id: key.sessionId, appName: key.appName, userId: key.userId, lastUpdateTime, revision, state };
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
  return {
    timestamp: Number(entry.slice(0, space)),
    id: JSON.parse(entry.slice(space + 1, newline)) as string,
    json: entry.slice(newline + 1),
  };
}
