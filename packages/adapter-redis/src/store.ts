/**
 * The Redis store: translates the persistence contract of `@adk-state/core`
 * to one server-side script per operation (see `scripts.ts` for the scripts
 * and `keys.ts` for the key layout). Values, state keys and events are kept
 * as the JSON text core hands over, and handed back unchanged.
 */
import type {
  AppendInput,
  AppendResult,
  Bucket,
  CreateInput,
  CreateResult,
  EventFilter,
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
} from '@adk-state/core';
import { type CommandClient, Connection } from './connection.js';
import {
  appKeys,
  decodeText,
  encodeText,
  REVISION_FIELD,
  SEPARATOR,
  type SessionKeys,
  sessionKeys,
  UPDATED_FIELD,
  userKeys,
} from './keys.js';
import { APPEND, CREATE, DELETE, IMPORT, LIST, LOAD, READ_BUCKET, runScript, type Script, script } from './scripts.js';

const scripts = {
  create: script('create', CREATE),
  append: script('append', APPEND),
  importSession: script('import', IMPORT),
  load: script('load', LOAD),
  remove: script('delete', DELETE),
  list: script('list', LIST),
  readBucket: script('readBucket', READ_BUCKET),
};

/** What {@link RedisStore} needs besides a client. */
export interface RedisStoreOptions {
  /** Put in front of every key; must not contain `{` or `}` (checked by the service). */
  keyPrefix: string;
  /** Idle time to live of a session and its events, in milliseconds; 0 for none. */
  sessionTtlMs: number;
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
  Object.values(scripts).map((entry) => [entry.name, entry.sha]),
);

export class RedisStore implements SessionStore {
  readonly backend = 'redis';
  readonly #connection: Connection;
  readonly #prefix: string;
  readonly #ttl: number;
  readonly #release: (() => Promise<void>) | undefined;

  constructor(client: CommandClient, options: RedisStoreOptions) {
    this.#connection = new Connection(client, options.ownsClient === true);
    this.#prefix = options.keyPrefix;
    this.#ttl = options.sessionTtlMs;
    this.#release = options.release;
  }

  async createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult> {
    const keys = this.#keys(input.key);
    const reply = await this.#run('createSession', true, call, scripts.create, writeKeys(keys), [
      String(input.createTime),
      String(input.revision),
      ...this.#bucketArguments(keys, input.state, input.userDelta, input.appDelta),
    ]);
    if (!Array.isArray(reply)) return { status: 'exists' };
    const [user, app] = reply as [string[], string[]];
    return { status: 'created', userState: toBucket(user), appState: toBucket(app) };
  }

  /** The whole session in one script: record, buckets, every event in order, lastUpdateTime; atomic. */
  async importSession(input: ImportInput, call?: StoreCall): Promise<ImportResult> {
    const keys = this.#keys(input.key);
    const events: string[] = [String(input.events.length)];
    for (const event of input.events) events.push(encodeEntry(event), encodeText(event.id));
    const reply = await this.#run('importSession', true, call, scripts.importSession, writeKeys(keys), [
      String(input.lastUpdateTime),
      String(input.revision),
      ...this.#bucketArguments(keys, input.state, input.userDelta, input.appDelta),
      ...events,
    ]);
    return Number(reply) === 1 ? { status: 'imported' } : { status: 'exists' };
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
    const reply = await this.#run(
      'getSession',
      false,
      call,
      scripts.load,
      [keys.session, keys.events, keys.userState, keys.appState],
      [after === undefined ? '' : String(after), limit === undefined ? '' : String(limit)],
    );
    if (!Array.isArray(reply)) return undefined;
    const [session, user, app, entries] = reply as [string[], string[], string[], string[]];
    return {
      session: toRecord(key, session),
      userState: toBucket(user),
      appState: toBucket(app),
      events: entries.map(decodeEntry),
    };
  }

  async appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult> {
    const keys = this.#keys(input.key);
    const reply = await this.#run('appendEvent', true, call, scripts.append, writeKeys(keys), [
      String(input.expectedRevision),
      String(input.lastUpdateTime),
      encodeEntry(input.event),
      encodeText(input.event.id),
      ...this.#bucketArguments(keys, input.sessionDelta, input.userDelta, input.appDelta),
    ]);
    const code = Number(reply);
    if (code === 0) return { status: 'ok' };
    if (code === -1) return { status: 'missing' };
    return { status: 'stale', revision: code };
  }

  /**
   * The arguments the create and append scripts share, after their own:
   * the three bucket sizes, the TTL, the index members, then the
   * field/value pairs of the session, user and app buckets.
   */
  #bucketArguments(keys: SessionKeys, session: Bucket, user: Bucket, app: Bucket): Array<string | number> {
    return [
      session.size,
      user.size,
      app.size,
      this.#ttl,
      keys.appMember,
      keys.userMember,
      keys.expiryMember,
      ...pairs(session),
      ...pairs(user),
      ...pairs(app),
    ];
  }

  async deleteSession(key: SessionKey, call?: StoreCall): Promise<void> {
    const keys = this.#keys(key);
    await this.#run(
      'deleteSession',
      true,
      call,
      scripts.remove,
      [keys.session, keys.events, keys.eventIds, keys.appIndex, keys.userIndex, keys.expiry],
      [keys.appMember, keys.userMember, keys.expiryMember],
    );
  }

  async listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult> {
    const app = appKeys(this.#prefix, query.appName);
    const user = query.userId === undefined ? undefined : userKeys(this.#prefix, query.appName, query.userId);
    const reply = (await this.#run(
      'listSessions',
      false,
      call,
      scripts.list,
      [user ? user.userIndex : app.appIndex, app.appState, app.expiry, app.appIndex],
      [
        query.order,
        String(query.offset),
        query.limit === undefined ? '' : String(query.limit),
        user ? user.encodedUser : '',
      ],
    )) as [number | string, Array<[string, string[]]>, Array<[string, string[]]>, string[]];
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
    return { totalItems: Number(total), sessions, userStates, appState: toBucket(appState) };
  }

  async readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket> {
    const keys = userKeys(this.#prefix, appName, userId);
    return toBucket(
      (await this.#run('getUserState', false, call, scripts.readBucket, [keys.userState], [])) as string[],
    );
  }

  async readAppState(appName: string, call?: StoreCall): Promise<Bucket> {
    const keys = appKeys(this.#prefix, appName);
    return toBucket((await this.#run('getAppState', false, call, scripts.readBucket, [keys.appState], [])) as string[]);
  }

  async close(): Promise<void> {
    await this.#release?.();
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

  #keys(key: SessionKey): SessionKeys {
    return sessionKeys(this.#prefix, key.appName, key.userId, key.sessionId);
  }
}

/** The keys of the create and append scripts, in their order. */
function writeKeys(keys: SessionKeys): string[] {
  return [
    keys.session,
    keys.events,
    keys.eventIds,
    keys.userState,
    keys.appState,
    keys.appIndex,
    keys.userIndex,
    keys.expiry,
  ];
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
