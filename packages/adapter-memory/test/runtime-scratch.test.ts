import { describe, it } from 'vitest';
import type { GroupApi, TestKit } from '../../conformance-tests/src/kit.js';
import { uniqueName } from '../../conformance-tests/src/kit.js';
import { runtime } from '../../conformance-tests/src/groups/runtime.js';
import { MemorySessionService } from '../src/index.js';

for (const shared of [false, true]) {
  describe(`${runtime.title} (sharedBackend ${shared})`, () => {
    const api: GroupApi = {
      test(name, body, options = {}) {
        if (options.requires && !shared) return void it.skip(name, () => {});
        it(name, async () => {
          const one = new MemorySessionService();
          const kit: TestKit = {
            async service(opts = {}) {
              return shared ? one : new MemorySessionService(opts);
            },
            app: (label) => uniqueName(label),
          };
          await body(kit);
        });
      },
    };
    runtime.define(api);
  });
}
