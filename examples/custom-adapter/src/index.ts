/** A file-backed session service for @google/adk, written against the adk-state store contract. */
import { StateSessionService, type StateSessionServiceOptions } from '@adk-state/core';
import { FileStore } from './file-store.js';

export { FileStore } from './file-store.js';

export class FileSessionService extends StateSessionService {
  constructor(directory: string, options: StateSessionServiceOptions = {}) {
    super(new FileStore(directory), options);
  }
}
