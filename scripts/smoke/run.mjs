// Consumer smoke test: packs every public package, installs @google/adk plus core and
// ONE adapter from the tarballs into a scratch project outside the workspace, and runs
// an ADK Runner conversation through it from ESM and from CommonJS, on every Node
// version of the matrix. Also checks that the install pulled in no other adapter and
// no backend client but the adapter's own. Every app runs with loopback-guard.cjs preloaded:
// a connection or lookup beyond this machine fails it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packPublic } from '../pack-public.mjs';
import { adapters } from './adapters.mjs';
import { nodeBinaries } from './node-versions.mjs';

const only = process.argv.slice(2);
const scratch = mkdtempSync(join(tmpdir(), 'adk-state-smoke-'));
const tarballs = join(scratch, 'tarballs');
mkdirSync(tarballs);
const CLIENTS = ['ioredis', 'mongodb', '@google-cloud/firestore'];

function run(command, args, options = {}) {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...options });
}

try {
  const packed = packPublic(tarballs);
  const template = readFileSync(new URL('./app.template.js', import.meta.url), 'utf8');
  const guard = new URL('./loopback-guard.cjs', import.meta.url).pathname;
  const nodes = await nodeBinaries();

  for (const adapter of adapters.filter((a) => only.length === 0 || only.includes(a.folder))) {
    if (!packed.has(adapter.name)) throw new Error(`${adapter.name} was not packed`);
    const project = join(scratch, adapter.folder);
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: `smoke-${adapter.folder}`, private: true }));
    run(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--legacy-peer-deps',
        '--loglevel=error',
        '@google/adk@2.0.0',
        packed.get('@adk-state/core'),
        packed.get(adapter.name),
        ...adapter.clients,
      ],
      { cwd: project },
    );
    const installed = readdirSync(join(project, 'node_modules', '@adk-state')).sort();
    const expected = ['core', adapter.folder].sort();
    if (JSON.stringify(installed) !== JSON.stringify(expected)) {
      throw new Error(`${adapter.name} pulled in ${installed.join(', ')}; expected only ${expected.join(', ')}`);
    }
    for (const client of CLIENTS) {
      const present = existsSync(join(project, 'node_modules', ...client.split('/')));
      const own = adapter.clients.some((spec) => spec === client || spec.startsWith(`${client}@`));
      if (present && !own) throw new Error(`${adapter.name} pulled in the backend client ${client}`);
    }
    const esm = template.replace(
      '/*IMPORTS*/',
      `import { BaseLlm, LlmAgent, Runner } from '@google/adk';\nimport * as adapter from '${adapter.name}';\n${adapter.factory}`,
    );
    const cjs = template.replace(
      '/*IMPORTS*/',
      `const { BaseLlm, LlmAgent, Runner } = require('@google/adk');\nconst adapter = require('${adapter.name}');\n${adapter.factory}`,
    );
    writeFileSync(join(project, 'app.mjs'), esm);
    writeFileSync(join(project, 'app.cjs'), cjs);
    const backend = await adapter.start();
    try {
      for (const node of nodes) {
        for (const entry of ['app.mjs', 'app.cjs']) {
          run(node.path, ['--require', guard, entry], {
            cwd: project,
            stdio: ['ignore', 'inherit', 'inherit'],
            env: { ...process.env, ...backend.env, SMOKE_LABEL: `${adapter.name} ${entry}` },
          });
        }
      }
    } finally {
      await backend.stop();
    }
  }
  console.log(
    'consumer smoke test: every adapter worked from its tarball, from ESM and CommonJS, on every Node version',
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
