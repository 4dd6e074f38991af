/**
 * The packed CLI installs with plain npm next to a packed adapter, at the
 * version the tarballs carry and at another one: `pnpm pack` tarballs of
 * core, adapter-memory, adapter-redis and the CLI, installed by path into a
 * scratch project with npm, offline. Then `npm ls` finds every peer
 * satisfied, a second `npm install` succeeds, and the installed `adk-state`
 * reads a real Redis through the installed adapter.
 *
 * Nothing is fetched: third-party packages come as tarballs too, packed
 * from this repository's own node_modules (ioredis and commander with their
 * dependencies), and `@google/adk` as a small stand-in package (the commands
 * run here need only the two names the stores import from it).
 */
import { execFile } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const PACKAGES = fileURLToPath(new URL('../../', import.meta.url));
const CLI_DIR = join(PACKAGES, 'cli');

function run(
  file: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        cwd,
        env: { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', ...env },
        timeout: 180_000,
        maxBuffer: 32 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (error as { code?: unknown }).code : 0;
        if (error && typeof code !== 'number') reject(error);
        else resolve({ code: code as number, stdout, stderr });
      },
    );
  });
}

async function must(file: string, args: string[], cwd: string, env?: NodeJS.ProcessEnv): Promise<string> {
  const result = await run(file, args, cwd, env);
  if (result.code !== 0)
    throw new Error(`${file} ${args.join(' ')} exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** Packs a directory with npm into `into`; resolves with the tarball's path. */
async function npmPack(directory: string, into: string): Promise<string> {
  const name = (await must('npm', ['pack', directory, '--pack-destination', into, '--silent'], into)).trim();
  return join(into, name.split('\n').at(-1) as string);
}

/** Packs a workspace package with pnpm (workspace: ranges become versions); resolves with the tarball's path. */
async function pnpmPack(name: string, into: string): Promise<string> {
  const before = new Set(await readdir(into));
  await must('pnpm', ['pack', '--pack-destination', into], join(PACKAGES, name));
  const made = (await readdir(into)).find((file) => file.endsWith('.tgz') && !before.has(file));
  if (!made) throw new Error(`pnpm pack made no tarball for ${name}`);
  return join(into, made);
}

/** The directory of every package in the runtime dependency closure of `name`, as resolved from `from`. */
async function closure(name: string, from: string, found = new Map<string, string>()): Promise<Map<string, string>> {
  // Node's lookup, by hand: `<dir>/node_modules/<name>` from `from` upwards (a package's exports may hide its package.json).
  let directory: string | undefined;
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) {
      directory = realpathSync(candidate);
      break;
    }
    if (dirname(dir) === dir) throw new Error(`${name} is not installed where ${from} can see it`);
  }
  const manifestPath = join(directory, 'package.json');
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as {
    name: string;
    version: string;
    dependencies?: Record<string, string>;
  };
  const key = `${manifest.name}@${manifest.version}`;
  if (found.has(key)) return found;
  found.set(key, directory);
  for (const dependency of Object.keys(manifest.dependencies ?? {})) await closure(dependency, directory, found);
  return found;
}

/** Re-packs a tarball at another version (the package is otherwise the same). */
async function atVersion(tarball: string, version: string, scratch: string): Promise<string> {
  const directory = await mkdtemp(join(scratch, 'repack-'));
  await must('tar', ['-xzf', tarball, '-C', directory], scratch);
  const manifestPath = join(directory, 'package', 'package.json');
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { version: string };
  manifest.version = version;
  await writeFile(manifestPath, JSON.stringify(manifest, null, 2));
  const out = join(scratch, `v${version}`);
  await mkdir(out, { recursive: true });
  return npmPack(join(directory, 'package'), out);
}

/**
 * The CLI packed as `pnpm pack` packs it, from a build of the current source
 * into the scratch directory (a test run builds the CLI's dependencies only,
 * and the package's own dist/ is left as it is): the same files, with
 * `workspace:` ranges turned into the versions they name.
 */
async function packCliFromSource(scratch: string, into: string): Promise<string> {
  const copy = join(scratch, 'cli-package');
  await must(join(PACKAGES, '../node_modules/.bin/tsup'), ['--out-dir', join(copy, 'dist')], CLI_DIR);
  const manifest = JSON.parse(await readFile(join(CLI_DIR, 'package.json'), 'utf8')) as Record<string, unknown>;
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
    const ranges = manifest[field] as Record<string, string> | undefined;
    for (const [name, range] of Object.entries(ranges ?? {})) {
      if (!range.startsWith('workspace:')) continue;
      const directory = join(PACKAGES, name.replace('@adk-state/', ''));
      const { version } = JSON.parse(await readFile(join(directory, 'package.json'), 'utf8')) as { version: string };
      (ranges as Record<string, string>)[name] = version;
    }
  }
  delete manifest.devDependencies;
  delete manifest.scripts;
  await writeFile(join(copy, 'package.json'), JSON.stringify(manifest, null, 2));
  for (const file of ['README.md', 'LICENSE']) await copyFile(join(CLI_DIR, file), join(copy, file));
  return npmPack(copy, into);
}

describe('the packed CLI with a packed adapter, installed by plain npm', () => {
  let scratch: string;
  let redis: RedisServer;
  let tarballs: { core: string; memory: string; redis: string; cli: string; thirdParty: string[] };

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'adk-state-packed-'));
    redis = await startRedisServer();
    const packs = join(scratch, 'packs');
    await mkdir(packs);
    const [core, memory, redisAdapter] = [
      await pnpmPack('core', packs),
      await pnpmPack('adapter-memory', packs),
      await pnpmPack('adapter-redis', packs),
    ];
    const cli = await packCliFromSource(scratch, packs);
    const thirdParty: string[] = [];
    const directories = new Map<string, string>();
    await closure('ioredis', join(PACKAGES, 'adapter-redis'), directories);
    await closure('commander', CLI_DIR, directories);
    for (const directory of directories.values()) thirdParty.push(await npmPack(directory, packs));
    // @google/adk as a stand-in: the names the stores import, nothing more.
    const adk = join(scratch, 'adk-stand-in');
    await mkdir(adk);
    await writeFile(
      join(adk, 'package.json'),
      JSON.stringify({
        name: '@google/adk',
        version: '2.0.0',
        type: 'module',
        main: 'index.js',
        exports: './index.js',
      }),
    );
    await writeFile(
      join(adk, 'index.js'),
      'export class BaseSessionService {}\nexport function createEvent(params = {}) { return { ...params }; }\n',
    );
    thirdParty.push(await npmPack(adk, packs));
    tarballs = { core, memory, redis: redisAdapter, cli, thirdParty };
  }, 300_000);

  afterAll(async () => {
    await redis?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const install = async (name: string, adapterVersion: string | undefined) => {
    const project = join(scratch, name);
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }));
    // The CLI depends on core and adapter-memory at its own version; the adapter it only names as a peer.
    const adapters = [
      tarballs.core,
      adapterVersion ? await atVersion(tarballs.redis, adapterVersion, scratch) : tarballs.redis,
    ];
    const offline = ['--offline', '--no-audit', '--ignore-scripts'];
    await must(
      'npm',
      ['install', ...offline, tarballs.cli, tarballs.memory, ...adapters, ...tarballs.thirdParty],
      project,
    );
    return { project, offline };
  };

  for (const adapterVersion of [undefined, '3.1.4']) {
    const label = adapterVersion
      ? `the Redis adapter at ${adapterVersion}, the CLI at the packed version`
      : 'all at the packed version';
    it(`${label}: every peer is satisfied, a second install works, and adk-state reads Redis through the adapter`, async () => {
      const { project, offline } = await install(adapterVersion ? 'other-version' : 'same-version', adapterVersion);
      const installed = JSON.parse(
        await readFile(join(project, 'node_modules/@adk-state/adapter-redis/package.json'), 'utf8'),
      ) as { version: string };
      expect(installed.version).toBe(adapterVersion ?? '0.0.0');
      // npm ls exits non-zero on a missing or invalid peer.
      const tree = await run('npm', ['ls', '--all'], project);
      expect(tree.code, tree.stdout + tree.stderr).toBe(0);
      expect(tree.stdout).not.toMatch(/invalid|UNMET DEPENDENCY|UNMET PEER|missing/i);
      // The CLI's peer is the adapter the project installed (optional peers it did not install stay unmet, as they should).
      expect(tree.stdout).toContain(`@adk-state/adapter-redis@${adapterVersion ?? '0.0.0'} deduped`);
      const again = await run('npm', ['install', ...offline], project);
      expect(again.code, again.stdout + again.stderr).toBe(0);

      const bin = join(project, 'node_modules/.bin/adk-state');
      expect((await must(bin, ['--version'], project)).trim()).toBe('0.0.0');
      const inspect = await run(bin, ['inspect', `${redis.url}/0`, '--app', 'nothing-here'], project);
      expect(inspect.stderr).toBe('');
      expect(inspect.stdout.trim()).toBe('no sessions in app nothing-here');
      expect(inspect.code).toBe(0);
    });
  }
});
