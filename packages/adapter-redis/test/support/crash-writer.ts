/**
 * A writer process for the crash test: appends events with an `app:` key to
 * a session of its own through the outbox protocol, printing `acked <n>`
 * after each acknowledged append. After `--die-after` acknowledged appends
 * it stops between the two steps of the next one (its event stored, its app
 * delta not applied yet), prints `between <n>` and waits to be killed.
 *
 *   node --import tsx test/support/crash-writer.ts <options as JSON>
 */
import { Cluster, Redis } from 'ioredis';
import { RedisSessionService } from '../../src/index.js';
import { SCRIPT_SHAS } from '../../src/store.js';
import { testEvent } from './events.js';

interface Options {
  /** A single server's URL (the outbox protocol through `clusterProtocol`), or cluster nodes. */
  url?: string;
  nodes?: Array<{ host: string; port: number }>;
  keyPrefix: string;
  appName: string;
  userId: string;
  shards: number;
  dieAfter: number;
}

const options = JSON.parse(process.argv[2] as string) as Options;
const client = options.nodes ? new Cluster(options.nodes) : new Redis(options.url as string);
let n = 0;
let dying = false;
const hooked = new Proxy(client, {
  get(target, property, receiver) {
    if (property !== 'call') return Reflect.get(target, property, receiver);
    return (command: string, args: Array<string | number>) => {
      if (dying && command === 'evalsha' && args[0] === SCRIPT_SHAS.apply) {
        process.stdout.write(`between ${n}\n`);
        return new Promise(() => {});
      }
      return target.call(command, args);
    };
  },
});
const service = new RedisSessionService({
  client: hooked,
  keyPrefix: options.keyPrefix,
  shards: options.shards,
  clusterProtocol: true,
  // Applied entries leave the outbox 2 s after they are known applied (60 s by default).
  outboxKeepMs: 2_000,
  drainIntervalMs: Number.POSITIVE_INFINITY,
});
const session = await service.createSession({ appName: options.appName, userId: options.userId, sessionId: 's' });
for (n = 1; ; n++) {
  dying = n > options.dieAfter;
  await service.appendEvent({ session, event: testEvent({ n, [`app:${options.userId}`]: n }) });
  process.stdout.write(`acked ${n}\n`);
}
