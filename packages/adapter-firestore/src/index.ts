/**
 * @adk-state/adapter-firestore: durable ADK session state in Cloud Firestore.
 * One document per event, one commit per append, any string as an id or a
 * state key.
 */
import { StateSessionService } from '@adk-state/core';
import type { FirestoreSessionServiceOptions } from './options.js';
import { FirestoreStore } from './store.js';

export { DocumentTooLargeError, MAX_DOCUMENT_BYTES } from './limits.js';
export {
  DEFAULT_CLOSE_WAIT_MS,
  DEFAULT_ROOT_COLLECTION,
  DEFAULT_TTL_FIELD,
  type FirestoreSessionServiceOptions,
  type FirestoreStoreOptions,
  MAX_SESSION_TTL_SECONDS,
} from './options.js';
export { FirestoreStore } from './store.js';

/** A drop-in `sessionService` for the `@google/adk` Runner that keeps sessions in Firestore. */
export class FirestoreSessionService extends StateSessionService {
  declare readonly store: FirestoreStore;

  constructor(options: FirestoreSessionServiceOptions) {
    super(new FirestoreStore(options), options);
  }
}
