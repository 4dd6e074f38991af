import { describe, expect, it } from 'vitest';
import type { RedisStoreWarning } from '../src/index.js';
import { quietWarnings, WARNING_QUIET_MS } from '../src/warnings.js';

function gate() {
  const given: RedisStoreWarning[] = [];
  let time = 1_000_000;
  const warn = quietWarnings(
    (warning) => given.push(warning),
    () => time,
  );
  const pass = (ms: number) => {
    time += ms;
  };
  return { given, warn, pass };
}

const behind = (appName: string, shard: number): RedisStoreWarning => ({
  code: 'shard-position-behind',
  message: 'shard lost positions',
  appName,
  shard,
});

describe('warnings of a store', () => {
  it('a burst of one warning gives it once, and the next after the quiet spell says how many were held back', () => {
    const { given, warn, pass } = gate();
    for (let call = 0; call < 500; call++) {
      warn(behind('app', 1));
      pass(10);
    }
    expect(given).toHaveLength(1);
    expect(given[0]?.held).toBeUndefined();
    pass(WARNING_QUIET_MS);
    warn(behind('app', 1));
    expect(given).toHaveLength(2);
    expect(given[1]?.held).toBe(499);
    expect(given[1]?.message).toMatch(/^shard lost positions \(499 more like it since .* were held back\)$/);
    pass(WARNING_QUIET_MS);
    warn(behind('app', 1));
    expect(given[2]).toEqual(behind('app', 1));
  });

  it('another code, app or shard is not held back', () => {
    const { given, warn } = gate();
    warn(behind('app', 1));
    warn(behind('app', 2));
    warn(behind('other', 1));
    warn({ ...behind('app', 1), code: 'app-mark-behind' });
    warn({ code: 'drain-failed', message: 'drain', appName: 'app' });
    expect(given.map((warning) => `${warning.code} ${warning.appName} ${warning.shard}`)).toEqual([
      'shard-position-behind app 1',
      'shard-position-behind app 2',
      'shard-position-behind other 1',
      'app-mark-behind app 1',
      'drain-failed app undefined',
    ]);
  });

  it('a callback that throws does not break the call that noticed', () => {
    const warn = quietWarnings(() => {
      throw new Error('callback');
    });
    expect(() => warn(behind('app', 1))).not.toThrow();
  });
});
