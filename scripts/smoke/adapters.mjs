// The adapters the consumer smoke test installs, each with the backend it needs.
// `factory` is source text placed in the scratch app: `makeService(adapter)` returns a service.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const none = async () => ({ env: {}, stop: async () => {} });

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startRedis() {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  for (let attempt = 0; attempt < 100; attempt++) {
    const ready = await new Promise((resolve) => {
      const probe = spawn('redis-cli', ['-p', String(port), 'ping'], { stdio: 'ignore' });
      probe.on('exit', (code) => resolve(code === 0));
    });
    if (ready) break;
    await sleep(50);
  }
  return {
    env: { REDIS_URL: `redis://127.0.0.1:${port}` },
    stop: async () => {
      child.kill('SIGTERM');
    },
  };
}

export const adapters = [
  {
    name: '@adk-state/adapter-memory',
    folder: 'adapter-memory',
    clients: [],
    start: none,
    factory: 'async function makeService(mod) { return new mod.MemorySessionService(); }',
  },
  {
    name: '@adk-state/adapter-redis',
    folder: 'adapter-redis',
    clients: ['ioredis@5'],
    start: startRedis,
    factory:
      "async function makeService(mod) { return new mod.RedisSessionService({ url: process.env.REDIS_URL, keyPrefix: 'smoke:' }); }",
  },
];
