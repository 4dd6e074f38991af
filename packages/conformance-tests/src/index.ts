/**
 * @adk-state/conformance-tests: the one suite that proves a session store
 * keeps the adk-state contract. Call {@link runConformanceSuite} from a
 * vitest test file with a {@link ConformanceTarget}.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type FaultWatch, watchProcessFaults } from './faults.js';
import { allGroups } from './groups/index.js';
import { createKit, type GroupApi } from './kit.js';
import type { ConformanceService, ConformanceTarget } from './target.js';

export { HOSTILE_IDS, LONG_USER_ID } from './groups/hostile.js';
export { allGroups } from './groups/index.js';
export type {
  FreshOptions,
  FreshStart,
  Group,
  GroupApi,
  ReloadOptions,
  SessionRef,
  TestKit,
  TestOptions,
} from './kit.js';
export { expectCode } from './kit.js';
export {
  callTool,
  type RecordedRequest,
  ScriptedModel,
  type ScriptedReply,
  type ScriptedStep,
  say,
} from './runtime/scripted-model.js';

import type { Capabilities } from './target.js';

export type {
  Capabilities,
  ConformanceService,
  ConformanceServiceOptions,
  ConformanceTarget,
  DamageControl,
  DamagedKey,
  Divergence,
  LostWritesControl,
  OutageControl,
  Restore,
} from './target.js';

/** Every test id the suite declares, in order (for checking divergence records). */
export function listConformanceTests(): string[] {
  const names: string[] = [];
  for (const group of allGroups) group.define({ test: (name) => names.push(`${group.title} › ${name}`) });
  return names;
}

/** Declares the whole suite for `target` in the current vitest file. */
export function runConformanceSuite<S extends ConformanceService>(target: ConformanceTarget<S>): void {
  const divergences = new Map((target.divergences ?? []).map((d) => [d.test, d]));
  const known = new Set(listConformanceTests());
  const unknown = [...divergences.keys()].filter((name) => !known.has(name));

  describe(`adk-state conformance: ${target.name}`, () => {
    let faults: FaultWatch | undefined;
    beforeAll(async () => {
      faults = watchProcessFaults();
      await target.setup?.();
    });
    afterAll(async () => {
      try {
        await target.teardown?.();
      } finally {
        faults?.close();
      }
    });

    it('every recorded divergence names a test of this suite', () => {
      if (unknown.length > 0) {
        throw new Error(`Divergences name no test of the suite: ${unknown.map((n) => JSON.stringify(n)).join(', ')}`);
      }
    });

    for (const group of allGroups) {
      describe(group.title, () => {
        const api: GroupApi = {
          test(name, body, options = {}) {
            const id = `${group.title} › ${name}`;
            const skipped = missingCapability(target.capabilities, options.requires);
            if (skipped !== undefined) {
              it.skip(`${name} (skipped: ${skipped})`, () => {});
              return;
            }
            const { outage, damage, lostWrites } = target.capabilities;
            const divergence = divergences.get(id);
            /**
             * Runs the test; `tolerated` (an intermittent divergence) is
             * told of a failure of the body instead of its throwing. Faults
             * and failures to destroy a service are never tolerated.
             */
            const run = async (tolerated?: (error: unknown) => void) => {
              const made: S[] = [];
              const kit = createKit(
                async (options) => {
                  const service = await target.create(options);
                  made.push(service);
                  return service;
                },
                outage && !('absent' in outage) ? outage : undefined,
                damage && !('absent' in damage) ? damage : undefined,
                lostWrites && !('absent' in lostWrites) ? lostWrites : undefined,
              );
              const seen = faults?.count() ?? 0;
              let failure: { error: unknown } | undefined;
              try {
                await body(kit);
              } catch (error) {
                if (!tolerated) throw error;
                failure = { error };
              } finally {
                for (const service of made) await target.destroy?.(service);
              }
              await faults?.expectNoneSince(seen, id);
              if (failure && tolerated) tolerated(failure.error);
            };
            if (divergence?.intermittent) {
              it(`${name} [recorded intermittent divergence: ${divergence.reason}]`, async (context) => {
                await run((error) => {
                  const note = `failed, as recorded (${divergence.reason}): ${errorText(error)}`;
                  // The note of a skip shows from vitest 3 on; the warning shows on every version.
                  console.warn(`${id}: ${note}`);
                  context.skip(note);
                });
              });
            } else if (divergence) it.fails(`${name} [recorded divergence: ${divergence.reason}]`, () => run());
            else it(name, () => run());
          },
        };
        group.define(api);
      });
    }
  });
}

/** Why a test that requires `capability` cannot run on `target`, or `undefined` when it can. */
function missingCapability(
  capabilities: Capabilities,
  required: keyof Capabilities | ReadonlyArray<keyof Capabilities> | undefined,
): string | undefined {
  if (required === undefined) return undefined;
  for (const capability of typeof required === 'string' ? [required] : required) {
    const declared = capabilities[capability];
    if (!declared) return `the target does not declare capability '${capability}'`;
    if (typeof declared === 'object' && 'absent' in declared)
      return `the target has no '${capability}': ${declared.absent}`;
  }
  return undefined;
}

/** An error's name and message, on one line, for a skip note. */
function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.replace(/\s+/g, ' ');
}
