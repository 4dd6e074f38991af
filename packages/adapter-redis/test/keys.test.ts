/** The key encodings: injective, UTF-8 safe, ordered like JavaScript strings, and one hash slot per app. */
import { HOSTILE_IDS as SUITE_HOSTILE_IDS } from '@adk-state/conformance-tests';
import { Cluster } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { appKeys, appTag, decodeText, encodeText, SEPARATOR, sessionKeys, shardOf, userKeys } from '../src/keys.js';

/**
 * The suite's hostile ids, and what targets this encoding most: hash-tag pairs,
 * an escape-like sequence and a lone surrogate.
 */
const HOSTILE_IDS: readonly string[] = [...new Set([...SUITE_HOSTILE_IDS, '}{', '{}', '%7B', '\ud800'])];

/** Strings that stress the encoding: every boundary of its ranges, lone and paired surrogates. */
const SAMPLES: string[] = [
  '',
  '\u0000',
  '\u0001',
  '\u0002',
  '\u0000\u0000',
  '\u0001\u0000',
  'a\u0000',
  'a',
  'ab',
  'a\u0001b',
  '\u007f',
  '\u0080',
  '\u07ff',
  '\u0800',
  '\ud7ff',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\ud800\udc00',
  '\udbff\udfff',
  '\ue000',
  '\uffff',
  '\u{10000}',
  '\u{10ffff}',
  '🚀',
  'e\u0301',
  'é',
  '%7B',
  '{',
  '}',
  ...HOSTILE_IDS,
];

function randomString(random: () => number): string {
  const ranges: Array<[number, number]> = [
    [0, 3],
    [0x30, 0x7a],
    [0x7b, 0x7d],
    [0xd7fe, 0xd801],
    [0xdbfe, 0xdc01],
    [0xdffe, 0xe001],
    [0xfffd, 0xffff],
  ];
  let out = '';
  const length = Math.floor(random() * 6);
  for (let index = 0; index < length; index++) {
    const [low, high] = ranges[Math.floor(random() * ranges.length)] as [number, number];
    out += String.fromCharCode(low + Math.floor(random() * (high - low + 1)));
  }
  return out;
}

/** A small deterministic generator, so a failure can be reproduced. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

const utf8 = (text: string) => Buffer.from(text, 'utf8');
const jsOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

describe('encodeText', () => {
  const random = seeded(7);
  const strings = [...SAMPLES, ...Array.from({ length: 1500 }, () => randomString(random))];

  it('round-trips every string, lone surrogates included, through UTF-8', () => {
    for (const text of strings) {
      const encoded = encodeText(text);
      expect(utf8(encoded).toString('utf8')).toBe(encoded);
      expect(decodeText(utf8(encoded).toString('utf8'))).toBe(text);
    }
  });

  it('never produces the separator U+0000', () => {
    for (const text of strings) expect(encodeText(text).includes(SEPARATOR)).toBe(false);
  });

  it('orders the UTF-8 bytes exactly as JavaScript orders the strings (UTF-16 code units)', () => {
    for (let i = 0; i < strings.length; i++) {
      for (let j = i; j < Math.min(strings.length, i + 60); j++) {
        const a = strings[i] as string;
        const b = strings[j] as string;
        expect(
          Math.sign(Buffer.compare(utf8(encodeText(a)), utf8(encodeText(b)))),
          `${escape(a)} vs ${escape(b)}`,
        ).toBe(jsOrder(a, b));
      }
    }
  });

  it('keeps composite members ordered by their first part, then their second', () => {
    const pairs: Array<[string, string]> = [];
    for (const a of SAMPLES.slice(0, 30)) for (const b of ['', '\u0000', 'a', '\uffff']) pairs.push([a, b]);
    const byMember = [...pairs].sort((x, y) =>
      Buffer.compare(
        utf8(encodeText(x[0]) + SEPARATOR + encodeText(x[1])),
        utf8(encodeText(y[0]) + SEPARATOR + encodeText(y[1])),
      ),
    );
    const byParts = [...pairs].sort((x, y) => jsOrder(x[0], y[0]) || jsOrder(x[1], y[1]));
    expect(byMember).toEqual(byParts);
  });

  it('leaves ordinary ids unchanged', () => {
    for (const text of ['session-1', 'a:b', 'ünïcødé', '日本語', '{a}', 'x'.repeat(1024)]) {
      expect(encodeText(text)).toBe(text);
    }
  });
});

describe('key layout', () => {
  it('gives every app a brace-free hash tag that no id can change', () => {
    for (const appName of SAMPLES.filter((text) => text !== '')) {
      const tag = appTag(appName);
      expect(tag).not.toMatch(/[{}#]/);
      const base = appKeys('p:', appName).base;
      expect(base).toBe(`p:{${tag}}:`);
      for (const id of HOSTILE_IDS) {
        const one = sessionKeys('p:', appName, id, id, 1);
        for (const key of [one.session, one.events, one.eventIds, one.userState, one.userIndex, one.app.appState]) {
          expect(key.startsWith(base)).toBe(true);
        }
        const keys = sessionKeys('p:', appName, id, id, 256);
        const shardBase = `p:{${tag}#${shardOf(id, 256)}}:`;
        for (const key of [keys.session, keys.events, keys.eventIds, keys.outbox, keys.userState, keys.userIndex]) {
          expect(key.startsWith(shardBase)).toBe(true);
        }
        expect(keys.app.appState.startsWith(base)).toBe(true);
      }
    }
  });

  it('never gives two different (app, user, session) triples the same key', () => {
    const seen = new Map<string, string>();
    const parts = ['a', 'b', 'a:b', 'b:c', 'a\u0000b', 'a}', '{a', 'a%7D', 'a%', '\ud800', '\ufffd', '\u0001'];
    for (const app of parts) {
      for (const user of parts) {
        for (const session of parts) {
          const keys = sessionKeys('p:', app, user, session, 4);
          const triple = JSON.stringify([app, user, session]);
          for (const key of [keys.session, keys.events, keys.eventIds]) {
            expect(seen.get(key) ?? triple).toBe(triple);
            seen.set(key, triple);
          }
          const pair = JSON.stringify([app, user]);
          for (const key of [userKeys('p:', app, user, 4).userState, userKeys('p:', app, user, 4).userIndex]) {
            expect(seen.get(key) ?? pair).toBe(pair);
            seen.set(key, pair);
          }
        }
      }
    }
  });

  it('refuses a key prefix with braces, and a client whose own keyPrefix has braces', () => {
    expect(() => new RedisSessionService({ url: 'redis://127.0.0.1:1', keyPrefix: 'a{b}' })).toThrow(/keyPrefix/);
    expect(() => new RedisSessionService({ url: 'redis://127.0.0.1:1', keyPrefix: '}' })).toThrow(/keyPrefix/);
    expect(() => new RedisSessionService({ url: 'redis://127.0.0.1:1', expireAfterIdleSeconds: 0 })).toThrow(
      /expireAfterIdleSeconds/,
    );
    expect(() => new RedisSessionService({} as never)).toThrow(/client/);
  });
});

const nodes = inject('redisClusterNodes');

describe.skipIf(nodes.length === 0)('hash slots on a real cluster', () => {
  it("puts every key of one user in its shard's slot (and with one shard, every key of the app in one slot), whatever braces the ids hold", async () => {
    const cluster = new Cluster(nodes);
    try {
      for (const appName of ['app', 'app{x}', '{app}', '}{', 'a}b{c', 'a#1', ...HOSTILE_IDS.slice(0, 12)]) {
        const appSlot = await cluster.cluster('KEYSLOT', appKeys('adk-state:', appName).appState);
        expect(await cluster.cluster('KEYSLOT', appKeys('adk-state:', appName).marks)).toBe(appSlot);
        for (const id of HOSTILE_IDS) {
          for (const shards of [1, 256]) {
            const keys = sessionKeys('adk-state:', appName, id, `{${id}}`, shards);
            const expected =
              shards === 1 ? appSlot : await cluster.cluster('KEYSLOT', `{${appTag(appName)}#${shardOf(id, shards)}}`);
            for (const key of [
              keys.session,
              keys.events,
              keys.eventIds,
              keys.outbox,
              keys.userState,
              keys.userIndex,
              keys.shardIndex,
              keys.expiry,
            ]) {
              expect(await cluster.cluster('KEYSLOT', key)).toBe(expected);
            }
          }
        }
      }
    } finally {
      await cluster.quit();
    }
  });
});
