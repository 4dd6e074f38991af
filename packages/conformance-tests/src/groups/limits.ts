/**
 * Limits: input at the edges (deep values, odd deltas, huge offsets, absurd
 * options, endless contention) gets a typed error or the exact answer, never
 * a crash, a hang or a silent change.
 */
import { MAX_VALUE_DEPTH } from '@adk-state/core';
import { expect } from 'vitest';
import { allAwaited, expectCode, type Group, ids, makeEvent, plain, put } from '../kit.js';

/** An array nested `depth` levels deep around `leaf`. */
function nested(depth: number, leaf: unknown = 'core'): unknown {
  let value = leaf;
  for (let level = 0; level < depth; level++) value = [value];
  return value;
}

export const limits: Group = {
  title: 'input at the limits gets a typed error or the exact answer',
  define({ test }) {
    test(`values nested ${MAX_VALUE_DEPTH} levels round-trip; deeper ones are a StateValueError, even 100,000 deep`, async (kit) => {
      const deepest = nested(MAX_VALUE_DEPTH);
      const { service, session, appName } = await kit.fresh({ state: { deep: deepest } });
      await put(service, session, { 'user:deep': deepest });
      const loaded = await kit.reload(session);
      expect(loaded.state.deep).toEqual(deepest);
      expect(loaded.state['user:deep']).toEqual(deepest);
      for (const depth of [MAX_VALUE_DEPTH + 1, 4_000, 100_000]) {
        const tooDeep = nested(depth);
        await expectCode(
          service.createSession({ appName, userId: 'u1', sessionId: `d${depth}`, state: { x: tooDeep } }),
          'INVALID_STATE_VALUE',
          'StateValueError',
        );
        await expectCode(put(service, session, { 'app:x': tooDeep }), 'INVALID_STATE_VALUE', 'StateValueError');
        expect(await service.getSession({ appName, userId: 'u1', sessionId: `d${depth}` })).toBeUndefined();
      }
      expect(await service.getAppState({ appName })).toEqual({});
      expect((await kit.reload(session)).events).toHaveLength(1);
    });

    test('a stateDelta that is not a plain object is an InvalidArgumentError and nothing is stored', async (kit) => {
      const { service, session, appName } = await kit.fresh({ state: { keep: 1 } });
      const deltas: unknown[] = [['x', 'y'], 'text', 5, true, new Map([['a', 1]])];
      for (const delta of deltas) {
        const event = makeEvent();
        (event.actions as { stateDelta: unknown }).stateDelta = delta;
        const error = await expectCode(service.appendEvent({ session, event }), 'INVALID_ARGUMENT');
        expect(error.message).toContain('stateDelta');
      }
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ keep: 1 });
      expect(loaded.events).toEqual([]);
      expect(session.events).toEqual([]);
      await expectCode(
        service.createSession({ appName, userId: 'u1', state: new Map() as unknown as Record<string, unknown> }),
        'INVALID_ARGUMENT',
      );
    });

    test('an event whose content JSON would drop or change is refused, naming the path; nothing is stored', async (kit) => {
      const { service, session } = await kit.fresh();
      const bad: Array<[string, unknown, string]> = [
        ['a function', () => 1, 'function'],
        ['a symbol', Symbol('s'), 'symbol'],
        ['NaN', Number.NaN, 'NaN'],
        ['undefined in an array', [1, undefined], 'undefined'],
        ['a deep value', nested(MAX_VALUE_DEPTH + 20), 'deeper'],
      ];
      for (const [label, value, word] of bad) {
        const event = makeEvent({ a: 1 });
        (event.content?.parts?.[0] as Record<string, unknown>).extra = value;
        const error = await expectCode(service.appendEvent({ session, event }), 'INVALID_ARGUMENT');
        expect(error.message, label).toContain('$.content.parts[0].extra');
        expect(error.message, label).toContain(word);
      }
      const loaded = await kit.reload(session);
      expect(loaded.events).toEqual([]);
      expect(plain(loaded.state)).toEqual({});
      // An undefined property is simply left out, as JSON does.
      const event = makeEvent({ a: 1 });
      (event.content?.parts?.[0] as Record<string, unknown>).extra = undefined;
      await service.appendEvent({ session, event });
      expect((await kit.reload(session)).events).toHaveLength(1);
    });

    test('offsets and pages past the end give an empty page with the right totals', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const sessionId of ['a', 'b', 'c']) await service.createSession({ appName, userId: 'u1', sessionId });
      const huge = [3, 2 ** 31 - 1, 2 ** 31, 2 ** 32, Number.MAX_SAFE_INTEGER];
      for (const offset of huge) {
        for (const userId of ['u1', undefined]) {
          const query = { appName, ...(userId ? { userId } : {}), offset };
          const all = await service.listSessions(query);
          expect(all.sessions, `offset ${offset}`).toEqual([]);
          expect(all.totalItems, `offset ${offset}`).toBe(3);
          const one = await service.listSessions({ ...query, limit: 1 });
          expect(one.sessions, `offset ${offset} limit 1`).toEqual([]);
          expect([one.totalItems, one.totalPages], `offset ${offset} limit 1`).toEqual([3, 3]);
          const many = await service.listSessions({ ...query, limit: 2 ** 31 });
          expect(many.sessions, `offset ${offset} limit 2^31`).toEqual([]);
        }
      }
      const page = await service.listSessions({ appName, limit: 1, page: 2 ** 31 });
      expect([page.sessions.length, page.page, page.totalItems]).toEqual([0, 2 ** 31, 3]);
      const everything = await service.listSessions({ appName, limit: Number.MAX_SAFE_INTEGER });
      expect(everything.sessions.map((s) => s.id)).toEqual(['a', 'b', 'c']);
    });

    test('absurd service options are refused with InvalidArgumentError when the service is made', async (kit) => {
      // A misconfigured service fails when it is made, not at its first request in production.
      const absurd: Array<Record<string, unknown>> = [
        { timeoutMs: 0 },
        { timeoutMs: -1 },
        { timeoutMs: Number.NaN },
        { timeoutMs: '1000' },
        { timeoutMs: 2 ** 31 },
        { maxReloads: -1 },
        { maxReloads: 1.5 },
        { maxReloads: Number.POSITIVE_INFINITY },
        { onStale: 'retry' },
      ];
      for (const options of absurd) {
        await expectCode(
          Promise.resolve().then(() => kit.service(options)),
          'INVALID_ARGUMENT',
          'InvalidArgumentError',
        );
      }
      const { session } = await kit.fresh({
        sessionId: 's',
        serviceOptions: { timeoutMs: Number.POSITIVE_INFINITY, maxReloads: 0 },
      });
      expect((await kit.reload(session)).id).toBe('s');
    });

    test("onStale: 'reload' gives up after maxReloads with a StaleSessionError that names the contention", async (kit) => {
      const { service, session, appName } = await kit.fresh({
        sessionId: 's',
        serviceOptions: { onStale: 'reload', maxReloads: 0 },
      });
      const [a, b] = await allAwaited([kit.reload(session), kit.reload(session)]);
      await put(service, a, { n: 1 });
      const error = await expectCode(put(service, b, { n: 2 }), 'STALE_SESSION', 'StaleSessionError');
      expect((error as { contention?: boolean }).contention).toBe(true);
      expect(error.message).toMatch(/contention/i);
      expect(error.message).toContain('maxReloads');
      const loaded = await kit.reload(session);
      expect(loaded.state.n).toBe(1);
      expect(ids(loaded)).toHaveLength(1);
      // One reload allowed: the same conflict is resolved by reloading.
      const patient = await kit.service({ onStale: 'reload', maxReloads: 1 });
      const p = await patient.createSession({ appName, userId: 'u1', sessionId: 'p' });
      const [c, d] = await allAwaited([kit.reload(p, { service: patient }), kit.reload(p, { service: patient })]);
      await put(patient, c, { n: 3 });
      await put(patient, d, { n: 4 });
      expect((await kit.reload(p, { service: patient })).state.n).toBe(4);
    });
  },
};
