// The adapters the consumer smoke test installs, each with the backend it needs.
// `factory` is source text placed in the scratch app: `makeService(adapter)` returns a service.
import { spawn } from 'node:child_process';

const none = async () => ({ env: {}, stop: async () => {} });

// A server launcher of a private workspace package (@adk-state/test-servers,
// @adk-state/mongo-standin), run with tsx in that package's folder: it prints one JSON
// line describing itself, then serves until SIGTERM. A helper that is not ready within
// a minute, or that says something else, is killed.
async function startHelper(folder, script) {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: new URL(`../../packages/${folder}/`, import.meta.url),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stopped = new Promise((resolve) => child.once('exit', resolve));
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await stopped;
    clearTimeout(timer);
  };
  try {
    const line = await new Promise((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => reject(new Error(`${folder}/${script} was not ready within 60 s`)), 60_000);
      child.stdout.on('data', (chunk) => {
        text += chunk;
        const end = text.indexOf('\n');
        if (end >= 0) {
          clearTimeout(timer);
          resolve(text.slice(0, end));
        }
      });
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`${folder}/${script} exited (${code}) before it was ready`)));
    });
    return { info: JSON.parse(line), stop: kill };
  } catch (error) {
    await kill();
    throw error;
  }
}

async function startRedis() {
  const helper = await startHelper('test-servers', 'src/redis/cli.ts');
  return { env: { REDIS_URL: helper.info.url }, stop: helper.stop };
}

async function startMongoStandIn() {
  const helper = await startHelper('mongo-standin', 'src/cli.ts');
  return { env: { MONGODB_URL: helper.info.url }, stop: helper.stop };
}

// The emulator's helper starts Google's Firestore emulator when it is installed (the apt
// package google-cloud-cli-firestore-emulator), else the npm one, and says which. It also
// says which environment a process that loads @google-cloud/firestore needs: no
// metadata-server probe, a fixed project, no proxy.
async function startFirestoreEmulator() {
  const helper = await startHelper('test-servers', 'src/firestore/cli.ts');
  console.log(`@adk-state/adapter-firestore: smoke test on ${helper.info.description}`);
  return { env: { ...helper.info.env, FIRESTORE_EMULATOR_HOST: helper.info.hostPort }, stop: helper.stop };
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
  {
    name: '@adk-state/adapter-mongo',
    folder: 'adapter-mongo',
    clients: ['mongodb@7'],
    start: startMongoStandIn,
    factory:
      "async function makeService(mod) { return new mod.MongoSessionService({ url: process.env.MONGODB_URL, dbName: 'smoke' }); }",
  },
  {
    name: '@adk-state/adapter-firestore',
    folder: 'adapter-firestore',
    clients: ['@google-cloud/firestore@8'],
    start: startFirestoreEmulator,
    // The client gets the emulator, a project and dummy credentials explicitly: it never asks Google for any.
    factory: `async function makeService(mod) {
  const { Firestore } = await import('@google-cloud/firestore');
  const firestore = new Firestore({
    projectId: process.env.GOOGLE_CLOUD_PROJECT,
    host: process.env.FIRESTORE_EMULATOR_HOST,
    ssl: false,
    credentials: { client_email: 'smoke@example.com', private_key: 'dummy' },
  });
  return new mod.FirestoreSessionService({ firestore });
}`,
  },
];
