/**
 * The conformance suite's damage control for the Firestore store: changes
 * one field of a session's document, or of one of its event documents, with
 * a client of its own, as a record changed outside the store would be, and
 * puts it back.
 */
import type { DamageControl, DamagedKey, Restore } from '@adk-state/conformance-tests';
import { type DocumentReference, FieldValue, type Firestore } from '@google-cloud/firestore';
import { fieldName } from '../../src/encoding.js';
import { Layout } from '../../src/layout.js';

export function firestoreDamage(firestore: () => Firestore, rootCollection: string): DamageControl {
  const layout = () => new Layout(firestore(), rootCollection);
  /** Sets field `path` of `doc` to `bad`; the restore sets it back (or deletes it, when it had none). */
  const swap = async (doc: DocumentReference, path: string, bad: unknown): Promise<Restore> => {
    const snapshot = await doc.get();
    if (!snapshot.exists) throw new Error(`no document ${doc.path}`);
    const before: unknown = snapshot.get(path);
    await doc.update({ [path]: bad });
    return async () => {
      await doc.update({ [path]: before === undefined ? FieldValue.delete() : before });
    };
  };
  const session = (key: DamagedKey) => layout().session(key);
  return {
    revision: (key) => swap(session(key).session, 'revision', 'seven'),
    lastUpdateTime: (key) => swap(session(key).session, 'lastUpdateTime', 'now'),
    // Not text at all (what the adapter reads as text is a string or bytes).
    stateValue: (key, stateKey) => swap(session(key).session, `state.${fieldName(stateKey)}`, 5),
    event: (key, eventId) => swap(layout().event(session(key), eventId), 'json', 12),
    // The fields the listing's queries filter and order by, removed.
    async listingEntry(key) {
      const doc = session(key).session;
      const fields = ['userKey', 'lastUpdateKey', 'idOrder'];
      const snapshot = await doc.get();
      if (!snapshot.exists) throw new Error(`no document ${doc.path}`);
      const before = Object.fromEntries(fields.map((field) => [field, snapshot.get(field) as unknown]));
      await doc.update(Object.fromEntries(fields.map((field) => [field, FieldValue.delete()])));
      return async () => {
        await doc.update(before);
      };
    },
  };
}
