/**
 * Every test process here (and every `adk-state` process a test starts, which
 * inherits it) runs with the environment that keeps `@google-cloud/firestore`
 * on loopback: no metadata-server probe, a fixed project, no proxy.
 */
import { applyTestEnv } from '@adk-state/test-servers/firestore/env';

applyTestEnv();
