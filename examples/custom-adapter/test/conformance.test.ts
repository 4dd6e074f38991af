import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { FileSessionService } from '../src/index.js';
import { fileDamage } from './damage.js';

let directory = '';

runConformanceSuite({
  name: 'example file store',
  setup: async () => {
    directory = await mkdtemp(join(tmpdir(), 'adk-state-files-'));
  },
  teardown: async () => {
    await rm(directory, { recursive: true, force: true });
  },
  create: (options) => new FileSessionService(directory, options),
  capabilities: {
    sharedBackend: true,
    outage: { absent: 'a local directory cannot be taken away from a running process' },
    damage: fileDamage(() => directory),
    lostWrites: {
      absent: 'one directory on one machine: a write is lost only with the machine, and every cache with it',
    },
  },
});
