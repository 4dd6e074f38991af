/**
 * The conformance suite's damage control for the MongoDB store: changes one
 * field of a session's stored document, or of one of its event documents,
 * with a raw client, as a record changed outside the store would be, and
 * puts it back.
 */
import type { DamageControl, DamagedKey, LostWritesControl, Restore } from '@adk-state/conformance-tests';
import type { Collection, Document, MongoClient } from 'mongodb';
import { encodeFieldName } from '../src/encoding.js';
import { appBucketId, collectionNames, eventId, eventsOf, sessionId, userBucketId } from '../src/layout.js';

export function mongoDamage(client: () => MongoClient, dbName: string, prefix = 'adk_'): DamageControl {
  const names = collectionNames(prefix);
  /** Sets `path` of the document `_id` to `bad`; the restore sets it back (or removes it, when it had none). */
  const swap = async (collection: Collection, _id: unknown, path: string, bad: unknown): Promise<Restore> => {
    const filter = { _id } as Document;
    const found = await collection.findOne(filter);
    if (!found) throw new Error(`no document ${JSON.stringify(_id)} in ${collection.collectionName}`);
    let before: unknown = found;
    for (const part of path.split('.')) before = (before as Record<string, unknown> | undefined)?.[part];
    await collection.updateOne(filter, { $set: { [path]: bad } });
    return async () => {
      await collection.updateOne(
        filter,
        before === undefined ? { $unset: { [path]: '' } } : { $set: { [path]: before } },
      );
    };
  };
  const sessions = () => client().db(dbName).collection(names.sessions);
  const head = (key: DamagedKey) => sessionId(key.appName, key.userId, key.sessionId);
  return {
    revision: (key) => swap(sessions(), head(key), 'revision', 'seven'),
    lastUpdateTime: (key) => swap(sessions(), head(key), 'lastUpdateTime', 'now'),
    // Not text at all (the adapter keeps values and events as strings).
    stateValue: (key, stateKey) => swap(sessions(), head(key), `state.${encodeFieldName(stateKey)}`, 5),
    event: (key, id) =>
      swap(
        client().db(dbName).collection(names.events),
        eventId(key.appName, key.userId, key.sessionId, id),
        'json',
        12,
      ),
    // Both fields of the listing's indexes after the app: the head then reads like a bucket there.
    async listingEntry(key) {
      const filter = { _id: head(key) } as Document;
      const found = await sessions().findOne(filter);
      if (!found) throw new Error(`no session head ${JSON.stringify(head(key))}`);
      const { lastUpdateTime, sortId } = found;
      await sessions().updateOne(filter, { $unset: { lastUpdateTime: '', sortId: '' } });
      return async () => {
        await sessions().updateOne(filter, { $set: { lastUpdateTime, sortId } });
      };
    },
  };
}

/**
 * The conformance suite's lost-writes control for the MongoDB store: copies
 * the session's head, its user and app buckets and its event documents with
 * a raw client; the restore puts exactly those back, as a rollback after a
 * failover leaves a session whose last writes a majority never had (written
 * with a lower write concern, or read under `local` before they were lost).
 */
export function mongoLostWrites(client: () => MongoClient, dbName: string, prefix = 'adk_'): LostWritesControl {
  const names = collectionNames(prefix);
  return {
    async snapshot(key) {
      const db = client().db(dbName);
      const sessions = db.collection(names.sessions);
      const events = db.collection(names.events);
      const ids = [
        sessionId(key.appName, key.userId, key.sessionId),
        userBucketId(key.appName, key.userId),
        appBucketId(key.appName),
      ] as unknown[];
      const log = eventsOf(key.appName, key.userId, key.sessionId);
      const heads = await sessions.find({ _id: { $in: ids } } as Document).toArray();
      const logged = await events.find(log).toArray();
      return async () => {
        await sessions.deleteMany({ _id: { $in: ids } } as Document);
        if (heads.length > 0) await sessions.insertMany(heads);
        await events.deleteMany(log);
        if (logged.length > 0) await events.insertMany(logged);
      };
    },
  };
}
