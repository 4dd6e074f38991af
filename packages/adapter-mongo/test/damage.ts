/**
 * The conformance suite's damage control for the MongoDB store: changes one
 * field of a session's stored document, or of one of its event documents,
 * with a raw client, as a record changed outside the store would be, and
 * puts it back.
 */
import type { DamageControl, DamagedKey, Restore } from '@adk-state/conformance-tests';
import type { Collection, Document, MongoClient } from 'mongodb';
import { encodeFieldName } from '../src/encoding.js';
import { collectionNames, eventId, sessionId } from '../src/layout.js';

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
