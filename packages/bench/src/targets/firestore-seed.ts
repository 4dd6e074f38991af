/**
 * Bulk seeding for the Firestore store, used until the adapter ships its own
 * (see `firestore.ts`). One call of each kind goes through the service; its
 * documents are the templates for the rest, which are written in batches
 * with the adapter's own layout and key encodings. What the service then
 * reads back is checked, so a drift from the adapter's layout fails loudly
 * instead of measuring the wrong data.
 */
import { randomUUID } from 'node:crypto';
import { encodeEvent, mergeInto, splitState } from '@adk-state/core';
import type { BaseSessionService, Event } from '@google/adk';
import type { DocumentData, Firestore, WriteBatch } from '@google-cloud/firestore';
import { numberKey, orderKey } from '../../../adapter-firestore/src/encoding.js';
import { encodeState, Layout, statePaths } from '../../../adapter-firestore/src/layout.js';
import { sessionState } from '../seed-data.js';
import type { Seeder, SessionKey } from './types.js';

/** Writes per batch (Firestore's limit is 500). */
const BATCH = 400;

async function inBatches<T>(firestore: Firestore, items: T[], write: (batch: WriteBatch, item: T) => void) {
  for (let start = 0; start < items.length; start += BATCH) {
    const batch = firestore.batch();
    for (const item of items.slice(start, start + BATCH)) write(batch, item);
    await batch.commit();
  }
}

/** Sets `field` only where the template has it, so fields the adapter dropped are not invented. */
function withKey(template: DocumentData, field: string, value: unknown): DocumentData {
  return field in template ? { [field]: value } : {};
}

export function firestoreSeeder(service: BaseSessionService, firestore: Firestore, rootCollection: string): Seeder {
  const layout = new Layout(firestore, rootCollection);
  return {
    async history(key: SessionKey, events: Event[]) {
      const [first, ...rest] = events;
      const session = await service.createSession({ ...key, state: sessionState() });
      if (!first) return;
      await service.appendEvent({ session, event: first });
      const refs = layout.session(key);
      const head = (await refs.session.get()).data();
      const template = (await layout.event(refs, first.id).get()).data();
      if (!head || !template)
        throw new Error('the Firestore layout changed: no session or event document where expected');

      let revision = head.revision as number;
      let seq = head.eventCount as number;
      const sessionDelta = new Map();
      const userDelta = new Map();
      const appDelta = new Map();
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
          id: stored.id,
          timestamp: stored.timestamp,
          ...withKey(template, 'timestampKey', numberKey(stored.timestamp)),
          seq,
          revision,
          json: stored.json,
        };
        return { id: stored.id, document };
      });
      await inBatches(firestore, documents, (batch, { id, document }) => batch.set(layout.event(refs, id), document));
      const last = events[events.length - 1] as Event;
      await refs.session.update({
        revision,
        eventCount: seq,
        lastUpdateTime: last.timestamp,
        ...withKey(head, 'lastUpdateKey', numberKey(last.timestamp)),
        ...statePaths(encodeState(sessionDelta)),
      });
      await refs.user.set({ state: encodeState(userDelta) }, { merge: true });
      await refs.app.set({ state: encodeState(appDelta) }, { merge: true });

      const check = await service.getSession({ ...key, config: { numRecentEvents: 2 } });
      const ids = check?.events.map((event) => event.id).join();
      const expected = events
        .slice(-2)
        .map((event) => event.id)
        .join();
      if (ids !== expected || check?.state.turn !== (last.actions.stateDelta as Record<string, unknown>).turn) {
        throw new Error('the Firestore layout changed: the seeded history does not read back as appended');
      }
    },

    async sessions(appName: string, users: string[], count: number) {
      for (const [index, userId] of users.entries()) {
        await service.createSession({ appName, userId, sessionId: `s${index}`, state: sessionState() });
      }
      if (count <= users.length) return;
      const template = (
        await layout.session({ appName, userId: users[0] as string, sessionId: 's0' }).session.get()
      ).data();
      if (!template) throw new Error('the Firestore layout changed: no session document where expected');
      const base = Date.now();
      const heads = [];
      for (let index = users.length; index < count; index++) {
        const key = { appName, userId: users[index % users.length] as string, sessionId: `s${index}` };
        const time = base + index;
        heads.push({
          key,
          document: {
            ...template,
            userId: key.userId,
            id: key.sessionId,
            ...withKey(template, 'idOrder', orderKey(key.sessionId)),
            lastUpdateTime: time,
            ...withKey(template, 'lastUpdateKey', numberKey(time)),
            incarnation: randomUUID(),
          },
        });
      }
      await inBatches(firestore, heads, (batch, { key, document }) => batch.set(layout.session(key).session, document));
      const page = await service.listSessions({ appName, limit: 1, order: 'desc' });
      if (page.totalItems !== count || page.sessions[0]?.id !== `s${count - 1}`) {
        throw new Error('the Firestore layout changed: the seeded sessions do not list as created');
      }
    },
  };
}
