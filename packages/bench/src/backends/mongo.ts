/**
 * The MongoDB adapter's wire-compatible stand-in server (a replica-set
 * primary), run from its own command-line entry in a child process: once as
 * MongoDB 8.0 (with the multi-collection `bulkWrite` command, so an append is
 * one command and the commit) and once as MongoDB 7.0 (a command per
 * collection), so the bench shows both paths of the adapter.
 */
import { createRequire } from 'node:module';
import { MongoClient } from 'mongodb';
import { startChildServer } from './child.js';
import type { BackendSpec, RunningBackend } from './types.js';

export interface MongoBackend extends RunningBackend {
  /** A connection string for the official driver. */
  url: string;
}

const CLI = createRequire(import.meta.url).resolve('@adk-state/mongo-standin/cli');

function standInBackend(id: string, serverVersion: '7.0' | '8.0'): BackendSpec<MongoBackend> {
  return {
    id,
    label: `MongoDB ${serverVersion} stand-in`,
    async start() {
      const server = await startChildServer(CLI, ['--server-version', serverVersion]);
      const url = String(server.info.url);
      const client = new MongoClient(url);
      try {
        await client.connect();
        const admin = client.db('admin');
        const bulk = serverVersion === '8.0' ? 'with' : 'without';
        return {
          url,
          details: `MongoDB wire stand-in of @adk-state/adapter-mongo as MongoDB ${serverVersion}, ${bulk} the multi-collection bulkWrite command (replica-set primary, in a process of its own on 127.0.0.1), mongodb driver`,
          probes: [{ name: 'ping', run: () => admin.command({ ping: 1 }) }],
          async stop() {
            await client.close().catch(() => undefined);
            await server.stop();
          },
        };
      } catch (error) {
        await client.close().catch(() => undefined);
        await server.stop();
        throw error;
      }
    },
  };
}

/** The stand-in as MongoDB 8.0: appends go through `bulkWrite`. */
export const mongoBackend = standInBackend('mongodb', '8.0');

/** The stand-in as MongoDB 7.0: appends send a command per collection. */
export const mongo7Backend = standInBackend('mongodb-7', '7.0');
