/** The machine a run measured: cores, CPU, memory, Node, operating system. */
import { readFileSync } from 'node:fs';
import { cpus, release, totalmem, type } from 'node:os';
import type { Machine } from './results.js';

export function describeMachine(): Machine {
  const processors = cpus();
  return {
    cores: processors.length,
    cpuModel: processors[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    os: osName(),
  };
}

function osName(): string {
  try {
    const text = readFileSync('/etc/os-release', 'utf8');
    const pretty = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(text)?.[1];
    if (pretty) return `${pretty}, ${type()} ${release()}`;
  } catch {
    // Not Linux, or no os-release.
  }
  return `${type()} ${release()}`;
}

/** One line: `2 cores (AMD EPYC ...), 24 GiB, Node v20.20.2, Debian GNU/Linux 12 (bookworm)`. */
export function machineLine(machine: Machine): string {
  return `${machine.cores} cores (${machine.cpuModel}), ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.os}`;
}
