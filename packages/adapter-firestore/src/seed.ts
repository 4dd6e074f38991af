/**
 * `@adk-state/adapter-firestore/seed`: bulk seeding for benchmarks and load
 * tests. Builds a long history or many sessions in a few batched commits
 * instead of one transaction per append. The first session and event go
 * through the service; their documents are the templates for the rest,
 * written with this adapter's layout and key encodings, so the result is
 * what the service's own calls would have written (this package's tests
 * compare the two). What the service then reads back is checked, so a drift
 * from the layout fails loudly instead of seeding the wrong data.
 */
import { randomUUID } from 'node:crypto';
import { StateSessionService } from '@adk-state/core';
import { encodeEvent, mergeInto, type SessionKey, splitState } from '@adk-state/core/store';
import type { Event } from '@google/adk';
import type { DocumentData, WriteBatch } from '@google-cloud/firestore';
import { documentId, idOrder, numberKey, storeText } from './encoding.js';
import { encodeState, Layout, RECENT_EVENTS, statePaths } from './layout.js';
import type { FirestoreStore } from './store.js';

/** Writes per commit (Firestore allows 500). */
const BATCH = 400;

async function inBatches<T>(store: FirestoreStore, items: T[], write: (batch: WriteBatch, item: T) => void) {
  for (let start = 0; start < items.length; start += BATCH) {
    const batch = store.firestore.batch();
    for (const item of items.slice(start, start + BATCH)) write(batch, item);
    await batch.commit();
  }
}

/** `field: value` where the template has the field, so that no field the layout lacks is invented. */
function ifPresent(template: DocumentData, field: string, value: unknown): DocumentData {
  return field in template ? { [field]: value } : {};
}

/**
 * Creates the session `key`, which must not exist yet, holding `events`
 * (without `temp:` keys, which an append never stores), as appending them one
 * by one would; merges the events' `user:` and `app:` keys into the user's and
 * the app's state. `store` is the store of a `FirestoreSessionService`
 * (`service.store`).
 */
export async function seedHistory(store: FirestoreStore, key: SessionKey, events: Event[]): Promise<void> {
  const service = new StateSessionService(store);
  const layout = new Layout(store.firestore, store.rootCollection);
  const [first, ...rest] = events;
  const session = await service.createSession(key);
  if (!first) return;
  await service.appendEvent({ session, event: first });
  const refs = layout.session(key);
  const head = (await refs.session.get()).data();
  const template = (await layout.event(refs, first.id).get()).data();
  if (!head || !template) throw new Error('seedHistory: no session or event document where the layout puts them');

  let revision = head.revision as number;
  let seq = head.eventCount as number;
  const sessionDelta = new Map<string, string>();
  const userDelta = new Map<string, string>();
  const appDelta = new Map<string, string>();
  const documents = rest.map((event) => {
    const writes = splitState(event.actions?.stateDelta as Record<string, unknown> | undefined);
    mergeInto(sessionDelta, writes.session);
    mergeInto(userDelta, writes.user);
    mergeInto(appDelta, writes.app);
    revision++;
    seq++;
    const stored = encodeEvent(event);
    const document: DocumentData = {
      ...template,
      id: storeText(stored.id),
      timestamp: stored.timestamp,
      ...ifPresent(template, 'timestampKey', numberKey(stored.timestamp)),
      seq,
      revision,
      json: storeText(stored.json),
    };
    return { id: stored.id, document };
  });
  await inBatches(store, documents, (batch, { id, document }) => batch.set(layout.event(refs, id), document));
  const last = events[events.length - 1] as Event;
  const recent = events.slice(-RECENT_EVENTS).map((event) => layout.event(refs, event.id).id);
  await refs.session.update({
    ...ifPresent(head, 'recent', recent),
    revision,
    eventCount: seq,
    lastUpdateTime: last.timestamp,
    ...ifPresent(head, 'lastUpdateKey', numberKey(last.timestamp)),
    ...statePaths(encodeState(sessionDelta)),
  });
  // An empty map merged in would be taken as the whole field and replace the bucket's state: skipped.
  const user = encodeState(userDelta);
  const app = encodeState(appDelta);
  if (Object.keys(user).length > 0) await refs.user.set({ state: user }, { merge: true });
  if (Object.keys(app).length > 0) await refs.app.set({ state: app }, { merge: true });

  const check = await service.getSession({ ...key, config: { numRecentEvents: 2 } });
  const ids = (list: Event[] | undefined) => list?.map((event) => event.id).join() ?? '';
  if (ids(check?.events) !== ids(events.slice(-2))) {
    throw new Error('seedHistory: the seeded history does not read back as appended');
  }
}

/**
 * Creates `count` empty sessions `s0`, `s1`, ... in `appName`, an app with no
 * sessions yet, spread round-robin over `users`, the `i`-th updated at
 * `createTime + i`.
 */
export async function seedSessions(
  store: FirestoreStore,
  appName: string,
  users: string[],
  count: number,
  createTime = Date.now(),
): Promise<void> {
  const service = new StateSessionService(store, { now: () => createTime });
  const layout = new Layout(store.firestore, store.rootCollection);
  const first = users[0];
  if (count <= 0 || first === undefined) return;
  await service.createSession({ appName, userId: first, sessionId: 's0' });
  const template = (await layout.session({ appName, userId: first, sessionId: 's0' }).session.get()).data();
  if (!template) throw new Error('seedSessions: no session document where the layout puts it');
  const heads = [];
  for (let index = 1; index < count; index++) {
    const key = { appName, userId: users[index % users.length] as string, sessionId: `s${index}` };
    const time = createTime + index;
    heads.push({
      key,
      document: {
        ...template,
        userId: storeText(key.userId),
        ...ifPresent(template, 'userKey', documentId(key.userId)),
        id: storeText(key.sessionId),
        ...ifPresent(template, 'idOrder', idOrder(key.sessionId)),
        lastUpdateTime: time,
        ...ifPresent(template, 'lastUpdateKey', numberKey(time)),
        incarnation: randomUUID(),
      },
    });
  }
  await inBatches(store, heads, (batch, { key, document }) => batch.set(layout.session(key).session, document));
  const page = await service.listSessions({ appName, limit: 1, order: 'desc' });
  if (page.totalItems !== count || page.sessions[0]?.id !== `s${count - 1}`) {
    throw new Error('seedSessions: the seeded sessions do not list as created');
  }
}
