#!/usr/bin/env node
/** The `adk-state` executable. */
import { createRequire } from 'node:module';
import { createProgram } from './program.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };
await createProgram({ version }).parseAsync(process.argv);
