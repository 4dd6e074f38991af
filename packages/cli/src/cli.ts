#!/usr/bin/env node
/** The `adk-state` executable. */
import { createRequire } from 'node:module';
import { createProgram } from './program.js';
import { Redactor, redactStream } from './redact.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };
// Whatever this process prints, its own lines and those of the libraries it runs, hides the passwords of its URIs.
const redactor = new Redactor();
redactStream(process.stdout, redactor);
redactStream(process.stderr, redactor);
await createProgram({ version, redactor }).parseAsync(process.argv);
