/**
 * The conformance suite's damage control for the example store: edits one
 * app's file as a person (or another program) might, and puts it back.
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DamageControl, DamagedKey, Restore } from '@adk-state/conformance-tests';

/** The stored session as it sits in its app's file (the fields the damage touches). */
interface SessionEntry {
  userId: string;
  id: string;
  revision: unknown;
  lastUpdateTime: unknown;
  state: Array<[string, unknown]>;
  events: Array<{ id: string; json: unknown }>;
}

export function fileDamage(directory: () => string): DamageControl {
  const pathOf = (appName: string) =>
    join(directory(), `${createHash('sha256').update(Buffer.from(appName, 'utf16le')).digest('hex')}.json`);
  /** The session's entry in its file, changed by `change`; `undo` puts back only what `change` changed. */
  const edit = async (
    key: DamagedKey,
    change: (entry: SessionEntry) => void,
    undo: (entry: SessionEntry, before: SessionEntry) => void,
  ): Promise<Restore> => {
    const path = pathOf(key.appName);
    const read = async () => JSON.parse(await readFile(path, 'utf8')) as { sessions: SessionEntry[] };
    const entryOf = (file: { sessions: SessionEntry[] }) => {
      const entry = file.sessions.find((each) => each.userId === key.userId && each.id === key.sessionId);
      if (!entry) throw new Error(`no session ${key.sessionId} in ${path}`);
      return entry;
    };
    const file = await read();
    const before = structuredClone(entryOf(file));
    change(entryOf(file));
    await writeFile(path, JSON.stringify(file));
    return async () => {
      // What the service wrote meanwhile stays; only the damaged field goes back.
      const now = await read();
      undo(entryOf(now), before);
      await writeFile(path, JSON.stringify(now));
    };
  };
  /** A top-level field of the session's entry set to `bad`, and back. */
  const field = (key: DamagedKey, name: 'revision' | 'lastUpdateTime', bad: string) =>
    edit(
      key,
      (entry) => {
        entry[name] = bad;
      },
      (entry, before) => {
        entry[name] = before[name];
      },
    );
  return {
    revision: (key) => field(key, 'revision', 'seven'),
    lastUpdateTime: (key) => field(key, 'lastUpdateTime', 'now'),
    stateValue: (key, stateKey) =>
      edit(
        key,
        (entry) => {
          entry.state = entry.state.map(([name, text]) => [name, name === stateKey ? '{broken' : text]);
        },
        (entry, before) => {
          const text = before.state.find(([name]) => name === stateKey)?.[1];
          entry.state = entry.state.map(([name, now]) => [name, name === stateKey ? text : now]);
        },
      ),
    event: (key, eventId) =>
      edit(
        key,
        (entry) => {
          entry.events = entry.events.map((event) =>
            event.id === eventId ? { ...event, json: 'not an event' } : event,
          );
        },
        (entry, before) => {
          const json = before.events.find((event) => event.id === eventId)?.json;
          entry.events = entry.events.map((event) => (event.id === eventId ? { ...event, json } : event));
        },
      ),
  };
}
