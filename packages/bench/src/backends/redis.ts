/**
 * A private redis-server for the bench, started with the Redis adapter's own
 * test helper (no persistence: no AOF, no snapshots).
 */
import { Redis } from 'ioredis';
import type { BackendSpec, RunningBackend } from '../targets/types.js';

export interface RedisBackend extends RunningBackend {
  /** `redis://127.0.0.1:<port>` */
  url: string;
}

export const redisBackend: BackendSpec<RedisBackend> = {
  id: 'redis',
  label: 'Redis',
  async start() {
    const support = await import('../../../adapter-redis/test/support/index.js');
    const server = await support.startRedisServer();
    const client = new Redis(server.url);
    try {
      const info = String(await client.info('server'));
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
      return {
        url: server.url,
        details: `Redis ${version} (own redis-server on 127.0.0.1, no persistence)`,
        probes: [
          { name: 'PING', run: () => client.ping() },
          { name: 'SET', run: () => client.set('bench:raw', 'x') },
        ],
        async stop() {
          client.disconnect();
          await server.stop();
        },
      };
    } catch (error) {
      client.disconnect();
      await server.stop();
      throw error;
    }
  },
};
