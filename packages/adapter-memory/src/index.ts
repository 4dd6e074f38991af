/**
 * @adk-state/adapter-memory: the embedded default store, in this process's
 * memory. Nothing outlives the process.
 */
import { StateSessionService, type StateSessionServiceOptions } from '@adk-state/core';
import { MemoryStore } from './store.js';

export { MemoryStore } from './store.js';

/** Options of {@link MemorySessionService}. */
export type MemorySessionServiceOptions = StateSessionServiceOptions;

/** A drop-in `sessionService` for the `@google/adk` Runner that keeps everything in memory. */
export class MemorySessionService extends StateSessionService {
  constructor(options: MemorySessionServiceOptions = {}) {
    super(new MemoryStore(), options);
  }
}
