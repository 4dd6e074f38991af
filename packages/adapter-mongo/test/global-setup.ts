/**
 * Gives every test file a MongoDB to talk to: the server named by
 * MONGODB_URL when it is set (a replica set or a sharded cluster), otherwise
 * the project's stand-in, started here as a replica-set primary of MongoDB
 * 8.0 (with the multi-collection `bulkWrite` command) on a free port and
 * stopped after the run.
 */

import { type StandIn, startStandIn } from '@adk-state/mongo-standin';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The connection string of the server under test. */
    mongoUrl: string;
    /** True when the server is the stand-in started for this run (MONGODB_URL unset). */
    usingStandIn: boolean;
  }
}

let standIn: StandIn | undefined;

export async function setup(project: TestProject): Promise<void> {
  const external = process.env.MONGODB_URL;
  if (external) {
    project.provide('mongoUrl', external);
    project.provide('usingStandIn', false);
    return;
  }
  standIn = await startStandIn({ replicaSet: 'rs0', serverVersion: '8.0' });
  project.provide('mongoUrl', standIn.url);
  project.provide('usingStandIn', true);
}

export async function teardown(): Promise<void> {
  await standIn?.stop();
  standIn = undefined;
}
