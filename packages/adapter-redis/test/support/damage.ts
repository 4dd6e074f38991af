/**
 * The conformance suite's damage control for a Redis store: changes one
 * field of a session's stored hash, one entry of its log or its listing
 * entries with a raw client, as a record changed outside the store would be,
 * and puts it back. And its control of lost writes: a session's keys put
 * back as they were, as a restart from an older snapshot, or a failover to a
 * replica that lagged, leaves them.
 */
import type { DamageControl, DamagedKey, LostWritesControl, Restore } from '@adk-state/conformance-tests';
import { encodeText, FIELD, sessionKeys } from '../../src/keys.js';

/** The commands used, as any ioredis Redis or Cluster client of any supported major has them. */
export interface RawClient {
  hget(key: string, field: string): Promise<string | null>;
  hset(key: string, field: string, value: string): Promise<unknown>;
  hdel(key: string, field: string): Promise<unknown>;
  lindex(key: string, index: number): Promise<string | null>;
  lset(key: string, index: number, value: string): Promise<unknown>;
  zscore(key: string, member: string): Promise<string | null>;
  zrem(key: string, member: string): Promise<unknown>;
  zadd(key: string, score: string, member: string): Promise<unknown>;
  dumpBuffer(key: string): Promise<Buffer | null>;
  pttl(key: string): Promise<number>;
  restore(key: string, ttl: number, value: Buffer, replace: 'REPLACE'): Promise<unknown>;
  del(key: string): Promise<unknown>;
}

export function redisDamage(raw: () => RawClient, keyPrefix: string, shards: () => number = () => 1): DamageControl {
  const keysOf = (key: DamagedKey) => sessionKeys(keyPrefix, key.appName, key.userId, key.sessionId, shards());
  const swap = async (hash: string, field: string, bad: string): Promise<Restore> => {
    const client = raw();
    const before = await client.hget(hash, field);
    await client.hset(hash, field, bad);
    return async () => {
      if (before === null) await client.hdel(hash, field);
      else await client.hset(hash, field, before);
    };
  };
  return {
    revision: (key) => swap(keysOf(key).session, FIELD.revision, 'seven'),
    lastUpdateTime: (key) => swap(keysOf(key).session, FIELD.updated, 'now'),
    stateValue: (key, stateKey) => swap(keysOf(key).session, encodeText(stateKey), '{broken'),
    async event(key, eventId) {
      const client = raw();
      const keys = keysOf(key);
      const position = Number(await client.hget(keys.eventIds, encodeText(eventId)));
      const before = await client.lindex(keys.events, position);
      if (before === null) throw new Error(`no log entry at the position of event ${eventId}`);
      await client.lset(keys.events, position, 'not an entry');
      return async () => {
        await client.lset(keys.events, position, before);
      };
    },
    // Its members in the app's (shard's) and the user's listing indexes.
    async listingEntry(key) {
      const client = raw();
      const keys = keysOf(key);
      const entries: Array<[string, string]> = [
        [keys.shardIndex, keys.appMember],
        [keys.userIndex, keys.userMember],
      ];
      const scores: string[] = [];
      for (const [index, member] of entries) {
        const score = await client.zscore(index, member);
        if (score === null) throw new Error(`session ${key.sessionId} has no member in ${index}`);
        scores.push(score);
        await client.zrem(index, member);
      }
      return async () => {
        for (const [at, [index, member]] of entries.entries()) await client.zadd(index, scores[at] as string, member);
      };
    },
  };
}

export function redisLostWrites(
  raw: () => RawClient,
  keyPrefix: string,
  shards: () => number = () => 1,
): LostWritesControl {
  return {
    async snapshot(key) {
      const client = raw();
      const keys = sessionKeys(keyPrefix, key.appName, key.userId, key.sessionId, shards());
      // The session's hash (head and state), its log and the positions of its ids, each with its time to live.
      const saved: Array<{ name: string; dump: Buffer | null; ttl: number }> = [];
      for (const name of [keys.session, keys.events, keys.eventIds]) {
        saved.push({ name, dump: await client.dumpBuffer(name), ttl: await client.pttl(name) });
      }
      return async () => {
        for (const { name, dump, ttl } of saved) {
          if (dump === null) await client.del(name);
          else await client.restore(name, ttl > 0 ? ttl : 0, dump, 'REPLACE');
        }
      };
    },
  };
}
