/**
 * A session store in a directory of JSON files: one file per app, rewritten
 * whole under a lock file and swapped in with an atomic rename. Small and
 * slow on purpose: it shows how little a store has to do.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AppendInput,
  type AppendResult,
  type Bucket,
  type CreateInput,
  type CreateResult,
  compareSessions,
  type EventFilter,
  type ListQuery,
  type ListResult,
  type LoadResult,
  type SessionKey,
  type SessionStore,
  type StoredEvent,
  selectEvents,
} from '@adk-state/core/store';

/** What one app's file holds. Buckets are entry lists, so any key (even `__proto__`) is plain data. */
interface AppFile {
  appName: string;
  app: Array<[string, string]>;
  users: Array<[string, Array<[string, string]>]>;
  sessions: StoredSessionData[];
}

interface StoredSessionData {
  userId: string;
  id: string;
  lastUpdateTime: number;
  revision: number;
  state: Array<[string, string]>;
  events: StoredEvent[];
}

export class FileStore implements SessionStore {
  constructor(readonly directory: string) {}

  async createSession(input: CreateInput): Promise<CreateResult> {
    return this.#update(input.key.appName, (file) => {
      if (findSession(file, input.key)) return { status: 'exists' };
      const user = mergeEntries(userEntries(file, input.key.userId), input.userDelta);
      setUser(file, input.key.userId, user);
      file.app = mergeEntries(file.app, input.appDelta);
      file.sessions.push({
        userId: input.key.userId,
        id: input.key.sessionId,
        lastUpdateTime: input.createTime,
        revision: input.revision,
        state: [...input.state],
        events: [],
      });
      return { status: 'created', userState: new Map(user), appState: new Map(file.app) };
    });
  }

  async loadSession(key: SessionKey, filter: EventFilter): Promise<LoadResult | undefined> {
    const file = await this.#read(key.appName);
    const stored = findSession(file, key);
    if (!stored) return undefined;
    return {
      session: { ...head(stored, key.appName), state: new Map(stored.state) },
      userState: new Map(userEntries(file, key.userId)),
      appState: new Map(file.app),
      events: selectEvents(stored.events, filter),
    };
  }

  async appendEvent(input: AppendInput): Promise<AppendResult> {
    return this.#update(input.key.appName, (file) => {
      const stored = findSession(file, input.key);
      if (!stored) return { status: 'missing' };
      if (stored.revision !== input.expectedRevision) return { status: 'stale', revision: stored.revision };
      const position = stored.events.findIndex((event) => event.id === input.event.id);
      if (position >= 0) stored.events[position] = input.event;
      else stored.events.push(input.event);
      stored.state = mergeEntries(stored.state, input.sessionDelta);
      setUser(file, input.key.userId, mergeEntries(userEntries(file, input.key.userId), input.userDelta));
      file.app = mergeEntries(file.app, input.appDelta);
      stored.lastUpdateTime = input.lastUpdateTime;
      stored.revision += 1;
      return { status: 'ok' };
    });
  }

  async deleteSession(key: SessionKey): Promise<void> {
    await this.#update(key.appName, (file) => {
      file.sessions = file.sessions.filter((s) => !(s.userId === key.userId && s.id === key.sessionId));
    });
  }

  async listSessions(query: ListQuery): Promise<ListResult> {
    const file = await this.#read(query.appName);
    const matching = file.sessions
      .filter((s) => query.userId === undefined || s.userId === query.userId)
      .map((s) => ({ ...head(s, query.appName), state: new Map(s.state) }))
      .sort(compareSessions(query.order));
    const end = query.limit === undefined ? undefined : query.offset + query.limit;
    const sessions = matching.slice(query.offset, end);
    const userStates = new Map<string, Bucket>();
    for (const s of sessions) userStates.set(s.userId, new Map(userEntries(file, s.userId)));
    return { totalItems: matching.length, sessions, userStates, appState: new Map(file.app) };
  }

  async readUserState(appName: string, userId: string): Promise<Bucket> {
    return new Map(userEntries(await this.#read(appName), userId));
  }

  async readAppState(appName: string): Promise<Bucket> {
    return new Map((await this.#read(appName)).app);
  }

  /** File names are hashes of the UTF-16 code units, so any app name (any length, lone surrogates too) maps to a valid, distinct file. */
  #path(appName: string): string {
    return join(this.directory, `${createHash('sha256').update(Buffer.from(appName, 'utf16le')).digest('hex')}.json`);
  }

  async #read(appName: string): Promise<AppFile> {
    try {
      return JSON.parse(await readFile(this.#path(appName), 'utf8')) as AppFile;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { appName, app: [], users: [], sessions: [] };
      throw error;
    }
  }

  /** Read-modify-write of one app's file under an exclusive lock file. */
  async #update<T>(appName: string, change: (file: AppFile) => T): Promise<T> {
    await mkdir(this.directory, { recursive: true });
    const path = this.#path(appName);
    const lock = await acquire(`${path}.lock`);
    try {
      const file = await this.#read(appName);
      const result = change(file);
      const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
      await writeFile(temporary, JSON.stringify(file));
      await rename(temporary, path);
      return result;
    } finally {
      await lock.close();
      await rm(`${path}.lock`, { force: true });
    }
  }
}

async function acquire(lockPath: string) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await open(lockPath, 'wx');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 2_000) throw error;
      await sleep(2);
    }
  }
}

function findSession(file: AppFile, key: SessionKey): StoredSessionData | undefined {
  return file.sessions.find((s) => s.userId === key.userId && s.id === key.sessionId);
}

function head(stored: StoredSessionData, appName: string) {
  return {
    id: stored.id,
    appName,
    userId: stored.userId,
    lastUpdateTime: stored.lastUpdateTime,
    revision: stored.revision,
  };
}

function userEntries(file: AppFile, userId: string): Array<[string, string]> {
  return file.users.find(([id]) => id === userId)?.[1] ?? [];
}

function setUser(file: AppFile, userId: string, entries: Array<[string, string]>): void {
  file.users = file.users.filter(([id]) => id !== userId);
  file.users.push([userId, entries]);
}

function mergeEntries(entries: Array<[string, string]>, delta: Bucket): Array<[string, string]> {
  const merged = new Map(entries);
  for (const [key, text] of delta) merged.set(key, text);
  return [...merged];
}
