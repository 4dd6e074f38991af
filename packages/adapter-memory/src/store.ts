/**
 * The in-process store: nested Maps (never plain objects, so no id can reach
 * a prototype or another key), events kept as JSON text with an id index, so
 * an append costs O(size of the delta) and a tail read O(events returned).
 */
import {
  type AppendInput,
  type AppendResult,
  type Bucket,
  type CreateInput,
  type CreateResult,
  compareSessionKeys,
  compareSessions,
  type EventFilter,
  type HeldSession,
  type ImportInput,
  type ImportResult,
  type ListQuery,
  type ListResult,
  type LoadResult,
  mergeInto,
  type SessionKey,
  type SessionRecord,
  type SessionStore,
  type SinceResult,
  type StoredEvent,
  type StoredSessionKey,
  selectEvents,
} from '@adk-state/core/store';

interface StoredSession {
  record: SessionRecord;
  events: StoredEvent[];
  /** Event id to its position in `events`. */
  positions: Map<string, number>;
  /** This life of the key: new on every creation and import. */
  logMark: string;
  /** The revision of the last write of an event in place (a re-appended id); 0 when none. */
  rewrittenAt: number;
}

/** Log marks are unique within the process: a counter. */
let lives = 0;

interface AppData {
  state: Bucket;
  users: Map<string, Bucket>;
  /** userId to sessionId to session. */
  sessions: Map<string, Map<string, StoredSession>>;
}

export class MemoryStore implements SessionStore {
  readonly backend = 'memory';
  readonly #apps = new Map<string, AppData>();

  async createSession(input: CreateInput): Promise<CreateResult> {
    return this.#create(input);
  }

  #create(input: CreateInput): CreateResult {
    const { appName, userId, sessionId } = input.key;
    const app = this.#app(appName);
    let userSessions = app.sessions.get(userId);
    if (userSessions?.has(sessionId)) return { status: 'exists' };
    if (!userSessions) {
      userSessions = new Map();
      app.sessions.set(userId, userSessions);
    }
    const user = this.#user(app, userId);
    mergeInto(user, input.userDelta);
    mergeInto(app.state, input.appDelta);
    userSessions.set(sessionId, {
      record: {
        id: sessionId,
        appName,
        userId,
        lastUpdateTime: input.createTime,
        revision: input.revision,
        state: new Map(input.state),
      },
      events: [],
      positions: new Map(),
      logMark: `m${++lives}`,
      rewrittenAt: 0,
    });
    return { status: 'created', userState: new Map(user), appState: new Map(app.state) };
  }

  /** The whole session at once: created, then its events and times set, in one synchronous step. */
  async importSession(input: ImportInput): Promise<ImportResult> {
    const created = this.#create(input);
    if (created.status === 'exists') return created;
    const stored = this.#find(input.key) as StoredSession;
    for (const event of input.events) {
      const position = stored.positions.get(event.id);
      if (position === undefined) {
        stored.positions.set(event.id, stored.events.length);
        stored.events.push(event);
      } else {
        stored.events[position] = event;
      }
    }
    stored.record.lastUpdateTime = input.lastUpdateTime;
    return { status: 'imported' };
  }

  async loadSession(key: SessionKey, filter: EventFilter): Promise<LoadResult | undefined> {
    const stored = this.#find(key);
    if (!stored) return undefined;
    const app = this.#apps.get(key.appName) as AppData;
    return {
      session: copyRecord(stored.record),
      userState: new Map(app.users.get(key.userId)),
      appState: new Map(app.state),
      events: selectEvents(stored.events, filter),
      logMark: stored.logMark,
    };
  }

  /** The events after the held ones, or the whole log when the held copy is no longer its beginning. */
  async loadSessionSince(key: SessionKey, held: HeldSession): Promise<SinceResult | undefined> {
    const stored = this.#find(key);
    if (!stored) return undefined;
    const app = this.#apps.get(key.appName) as AppData;
    const restart =
      held.logMark !== stored.logMark ||
      held.revision > stored.record.revision ||
      stored.rewrittenAt > held.revision ||
      held.events > stored.events.length;
    return {
      session: copyRecord(stored.record),
      userState: new Map(app.users.get(key.userId)),
      appState: new Map(app.state),
      events: restart ? stored.events.slice() : stored.events.slice(held.events),
      logMark: stored.logMark,
      restart,
    };
  }

  async appendEvent(input: AppendInput): Promise<AppendResult> {
    const stored = this.#find(input.key);
    if (!stored) return { status: 'missing' };
    if (stored.record.revision !== input.expectedRevision) {
      return { status: 'stale', revision: stored.record.revision };
    }
    const app = this.#apps.get(input.key.appName) as AppData;
    const position = stored.positions.get(input.event.id);
    if (position === undefined) {
      stored.positions.set(input.event.id, stored.events.length);
      stored.events.push(input.event);
    } else {
      stored.events[position] = input.event;
      stored.rewrittenAt = input.expectedRevision + 1;
    }
    mergeInto(stored.record.state, input.sessionDelta);
    mergeInto(this.#user(app, input.key.userId), input.userDelta);
    mergeInto(app.state, input.appDelta);
    stored.record.lastUpdateTime = input.lastUpdateTime;
    stored.record.revision += 1;
    return { status: 'ok' };
  }

  async deleteSession(key: SessionKey): Promise<void> {
    this.#apps.get(key.appName)?.sessions.get(key.userId)?.delete(key.sessionId);
  }

  async listSessions(query: ListQuery): Promise<ListResult> {
    const app = this.#apps.get(query.appName);
    const records: SessionRecord[] = [];
    if (app) {
      const owners = query.userId === undefined ? [...app.sessions.values()] : [app.sessions.get(query.userId)];
      for (const sessions of owners) {
        if (sessions) for (const stored of sessions.values()) records.push(stored.record);
      }
    }
    records.sort(compareSessions(query.order));
    const end = query.limit === undefined ? undefined : query.offset + query.limit;
    const window = records.slice(query.offset, end).map(copyRecord);
    const userStates = new Map<string, Bucket>();
    for (const record of window) {
      if (!userStates.has(record.userId)) userStates.set(record.userId, new Map(app?.users.get(record.userId)));
    }
    return { totalItems: records.length, sessions: window, userStates, appState: new Map(app?.state) };
  }

  async listAppNames(): Promise<string[]> {
    return [...this.#apps.keys()];
  }

  /** Every session of the app (of one user, when given), by user, then id. */
  async listSessionKeys(appName: string, userId: string | undefined): Promise<StoredSessionKey[]> {
    const keys: StoredSessionKey[] = [];
    for (const [owner, sessions] of this.#apps.get(appName)?.sessions ?? []) {
      if (userId !== undefined && owner !== userId) continue;
      for (const sessionId of sessions.keys()) keys.push({ userId: owner, sessionId });
    }
    return keys.sort(compareSessionKeys);
  }

  async readUserState(appName: string, userId: string): Promise<Bucket> {
    return new Map(this.#apps.get(appName)?.users.get(userId));
  }

  async readAppState(appName: string): Promise<Bucket> {
    return new Map(this.#apps.get(appName)?.state);
  }

  #find(key: SessionKey): StoredSession | undefined {
    return this.#apps.get(key.appName)?.sessions.get(key.userId)?.get(key.sessionId);
  }

  #app(appName: string): AppData {
    let app = this.#apps.get(appName);
    if (!app) {
      app = { state: new Map(), users: new Map(), sessions: new Map() };
      this.#apps.set(appName, app);
    }
    return app;
  }

  #user(app: AppData, userId: string): Bucket {
    let user = app.users.get(userId);
    if (!user) {
      user = new Map();
      app.users.set(userId, user);
    }
    return user;
  }
}

function copyRecord(record: SessionRecord): SessionRecord {
  return { ...record, state: new Map(record.state) };
}
