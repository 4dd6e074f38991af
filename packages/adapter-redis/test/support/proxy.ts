/** A loopback TCP proxy in front of the test run's shared single server. */
import { startProxy, type TcpProxy } from '@adk-state/test-servers/proxy';
import { inject } from 'vitest';

/** Starts a proxy to the shared single server (`inject('redisUrl')`), on a free port. */
export function proxyToSharedServer(): Promise<TcpProxy> {
  return startProxy({ target: Number(new URL(inject('redisUrl')).port) });
}
