// The adapters the consumer smoke test installs, each with the backend it needs.
// `factory` is source text placed in the scratch app: `makeService(adapter)` returns a service.

const none = async () => ({ env: {}, stop: async () => {} });

export const adapters = [
  {
    name: '@adk-state/adapter-memory',
    folder: 'adapter-memory',
    clients: [],
    start: none,
    factory: 'async function makeService(mod) { return new mod.MemorySessionService(); }',
  },
];
