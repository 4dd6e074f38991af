/**
 * OpenTelemetry spans for store calls, through `@opentelemetry/api` when the
 * application has it installed (an optional peer). Without the package, or
 * without an SDK registered, nothing is recorded and nothing is paid beyond
 * one check per call.
 */
import type { Attributes, Tracer } from '@opentelemetry/api';
import { isAdkStateError } from './errors.js';

/** How the service reports its store calls as OpenTelemetry spans. */
export interface TelemetryOptions {
  /**
   * Also record `adk_state.user_id` and `adk_state.session_id` on spans.
   * Default false: spans carry the app name but no user or session ids, and
   * never state values.
   */
  recordIds?: boolean;
}

/** What a store may report about one call, for its span. Stores add to it when it is present. */
export interface StoreUsage {
  /**
   * Requests sent to the backend (a pipeline, a script or a batch counts
   * once): Redis counts the answered scripts, MongoDB the commands, Firestore
   * the RPCs of the call.
   */
  roundTrips: number;
  /** Bytes of state and events written or read, where the store knows them. */
  bytes: number;
}

/** The instrumentation scope of every span. */
export const TRACER_NAME = '@adk-state/core';

type Api = typeof import('@opentelemetry/api');

/** The API once it is loaded (`null`: not installed), shared by every service. */
let api: Api | null | undefined;
let loading: Promise<void> | undefined;

/** Starts loading `@opentelemetry/api` once per process; resolves when it is known whether it exists. */
function loadApi(): Promise<void> {
  loading ??= import('@opentelemetry/api').then(
    (module) => {
      api = module;
    },
    () => {
      api = null;
    },
  );
  return loading;
}

/** The no-op provider of the loaded API (what a proxy delegates to before an SDK registers); null if unknown. */
let noopProvider: unknown;

/**
 * Whether no SDK is registered: the global provider is the API's proxy and
 * delegates to the API's no-op provider. Then a span would record nothing
 * and carry on no trace, so none is made. Anything else (another copy of the
 * API, a provider of its own) counts as an SDK.
 */
function noSdk(otel: Api): boolean {
  const provider = otel.trace.getTracerProvider() as { getDelegate?: () => unknown };
  if (typeof provider.getDelegate !== 'function') return false;
  if (noopProvider === undefined) {
    noopProvider = typeof otel.ProxyTracerProvider === 'function' ? new otel.ProxyTracerProvider().getDelegate() : null;
  }
  return noopProvider !== null && provider.getDelegate() === noopProvider;
}

/** Who the call is about; ids are recorded only when the service opts in. */
export interface CallTarget {
  appName?: string;
  userId?: string;
  sessionId?: string;
}

/** Store answers that the service turns into a typed error, by the `status` of the answer. */
const REFUSALS: Record<string, { outcome: string; code: string }> = {
  exists: { outcome: 'exists', code: 'ALREADY_EXISTS' },
  missing: { outcome: 'missing', code: 'SESSION_NOT_FOUND' },
  stale: { outcome: 'stale', code: 'STALE_SESSION' },
};

function refusalOf(result: unknown): { outcome: string; code: string } | undefined {
  const status = (result as { status?: unknown } | null)?.status;
  return typeof status === 'string' ? REFUSALS[status] : undefined;
}

/** The spans of one service. */
export class Telemetry {
  readonly #enabled: boolean;
  readonly #recordIds: boolean;
  readonly #backend: string;
  #tracer: Tracer | undefined;

  constructor(backend: string, options: boolean | TelemetryOptions | undefined) {
    this.#enabled = options !== false;
    this.#recordIds = typeof options === 'object' && options !== null && options.recordIds === true;
    this.#backend = backend;
    if (this.#enabled) void loadApi();
  }

  /**
   * Runs `step` inside a span named `adk-state <operation>` (when tracing is
   * on and the API is installed): the span ends with the outcome, the store's
   * reported usage, and the error's code if it failed or the store refused
   * (`exists`, `missing`, `stale`; a stale answer is retried under
   * `onStale: 'reload'`, in a span of its own).
   */
  trace<T>(operation: string, target: CallTarget, step: (usage: StoreUsage | undefined) => Promise<T>): Promise<T> {
    if (!this.#enabled || api === null) return step(undefined);
    if (api === undefined) return loadApi().then(() => this.trace(operation, target, step));
    if (noSdk(api)) return step(undefined);
    this.#tracer ??= api.trace.getTracer(TRACER_NAME);
    const otel = api;
    const span = this.#tracer.startSpan(`adk-state ${operation}`, {
      kind: otel.SpanKind.CLIENT,
      attributes: this.#attributes(operation, target),
    });
    if (!span.isRecording() && !otel.trace.isSpanContextValid(span.spanContext())) {
      // No SDK registered (a no-op span with no trace to carry on): nothing to record or to pass down.
      return step(undefined);
    }
    return otel.context.with(otel.trace.setSpan(otel.context.active(), span), async () => {
      const usage: StoreUsage = { roundTrips: 0, bytes: 0 };
      try {
        const result = await step(usage);
        const refused = refusalOf(result);
        if (refused) {
          // The store answered, and said no: the caller gets the typed error of this code.
          span.setAttributes({ 'adk_state.outcome': refused.outcome, 'error.type': refused.code });
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: refused.code });
        } else {
          span.setAttribute('adk_state.outcome', 'ok');
        }
        return result;
      } catch (error) {
        const code = isAdkStateError(error) ? error.code : 'UNKNOWN';
        span.setAttributes({ 'adk_state.outcome': 'error', 'error.type': code });
        const backend = error as { mayHaveApplied?: unknown; timedOut?: unknown };
        if (typeof backend.mayHaveApplied === 'boolean') {
          span.setAttribute('adk_state.may_have_applied', backend.mayHaveApplied);
        }
        if (backend.timedOut === true) span.setAttribute('adk_state.timed_out', true);
        if (error instanceof Error) span.recordException(error);
        span.setStatus({ code: otel.SpanStatusCode.ERROR, message: code });
        throw error;
      } finally {
        if (usage.roundTrips > 0) span.setAttribute('adk_state.round_trips', usage.roundTrips);
        if (usage.bytes > 0) span.setAttribute('adk_state.bytes', usage.bytes);
        span.end();
      }
    });
  }

  #attributes(operation: string, target: CallTarget): Attributes {
    const attributes: Attributes = {
      'adk_state.operation': operation,
      'adk_state.backend': this.#backend,
      'db.system.name': this.#backend,
    };
    if (target.appName !== undefined) attributes['adk_state.app_name'] = target.appName;
    if (this.#recordIds) {
      if (target.userId !== undefined) attributes['adk_state.user_id'] = target.userId;
      if (target.sessionId !== undefined) attributes['adk_state.session_id'] = target.sessionId;
    }
    return attributes;
  }
}
