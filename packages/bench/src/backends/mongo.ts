/**
 * The MongoDB adapter's wire-compatible stand-in server (a replica-set
 * primary), run from its own command-line entry in a child process.
 */
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import type { BackendSpec, RunningBackend } from '../targets/types.js';
import { startChildServer } from './child.js';

export interface MongoBackend extends RunningBackend {
  /** A connection string for the official driver. */
  url: string;
}

const CLI = fileURLToPath(new URL('../../../adapter-mongo/test/standin/cli.ts', import.meta.url));

export const mongoBackend: BackendSpec<MongoBackend> = {
  id: 'mongodb',
  label: 'MongoDB stand-in',
  async start() {
    const server = await startChildServer(CLI);
    const url = String(server.info.url);
    const client = new MongoClient(url);
    try {
      await client.connect();
      const admin = client.db('admin');
      return {
        url,
        details: `MongoDB wire stand-in of @adk-state/adapter-mongo (replica-set primary, in a process of its own on 127.0.0.1), mongodb driver`,
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
