/**
 * OpenTelemetry: with an SDK registered, every store call of the service
 * becomes a span named after the operation, with the backend, the app, the
 * outcome and, for failures, the error's code; ids only on request.
 */

import { TRACER_NAME } from '@adk-state/core';
import { createEvent } from '@google/adk';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MemorySessionService } from '../src/index.js';

const exporter = new InMemorySpanExporter();

beforeAll(() => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});
afterAll(() => {
  trace.disable();
});
beforeEach(() => exporter.reset());

function spans() {
  return exporter.getFinishedSpans().map((span) => ({
    name: span.name,
    scope: span.instrumentationScope.name,
    attributes: span.attributes,
    status: span.status.code,
    exceptions: span.events.filter((event) => event.name === 'exception').length,
  }));
}

describe('OpenTelemetry spans', () => {
  it('one span per store call for every operation, with backend, app and outcome, and no ids by default', async () => {
    const service = new MemorySessionService();
    const session = await service.createSession({ appName: 'shop', userId: 'ada', state: { 'user:tier': 'gold' } });
    await service.appendEvent({
      session,
      event: createEvent({ invocationId: 'i1', author: 'user', actions: { stateDelta: { step: 1 } } as never }),
    });
    await service.getSession({ appName: 'shop', userId: 'ada', sessionId: session.id });
    await service.listSessions({ appName: 'shop' });
    await service.getUserState({ appName: 'shop', userId: 'ada' });
    await service.getAppState({ appName: 'shop' });
    await service.deleteSession({ appName: 'shop', userId: 'ada', sessionId: session.id });

    const recorded = spans();
    expect(recorded.map((span) => span.name)).toEqual([
      'adk-state createSession',
      'adk-state appendEvent',
      'adk-state getSession',
      'adk-state listSessions',
      'adk-state getUserState',
      'adk-state getAppState',
      'adk-state deleteSession',
    ]);
    for (const span of recorded) {
      expect(span.scope).toBe(TRACER_NAME);
      expect(span.attributes).toMatchObject({
        'adk_state.backend': 'memory',
        'db.system.name': 'memory',
        'adk_state.app_name': 'shop',
        'adk_state.outcome': 'ok',
      });
      expect(span.attributes['adk_state.operation']).toBe(span.name.replace('adk-state ', ''));
      expect(span.attributes).not.toHaveProperty('adk_state.user_id');
      expect(span.attributes).not.toHaveProperty('adk_state.session_id');
      // State values never reach a span.
      expect(JSON.stringify(span.attributes)).not.toContain('gold');
    }
  });

  it('a failed call records the error code and the exception, and sets the status to error', async () => {
    const service = new MemorySessionService();
    await service.createSession({ appName: 'shop', userId: 'ada', sessionId: 's1' });
    exporter.reset();
    await expect(service.createSession({ appName: 'shop', userId: 'ada', sessionId: 's1' })).rejects.toMatchObject({
      code: 'ALREADY_EXISTS',
    });
    const stale = await service.getSession({ appName: 'shop', userId: 'ada', sessionId: 's1' });
    await service.deleteSession({ appName: 'shop', userId: 'ada', sessionId: 's1' });
    exporter.reset();
    await expect(
      service.appendEvent({ session: stale!, event: createEvent({ invocationId: 'i', author: 'user' }) }),
    ).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    const [failed] = spans();
    expect(failed).toMatchObject({
      name: 'adk-state appendEvent',
      status: 2,
      exceptions: 0,
      attributes: { 'adk_state.outcome': 'missing', 'error.type': 'SESSION_NOT_FOUND' },
    });
  });

  it('a backend failure records the exception, BACKEND_ERROR and whether the write may have applied', async () => {
    const service = new MemorySessionService();
    service.store.deleteSession = async () => {
      throw new Error('disk on fire');
    };
    await expect(service.deleteSession({ appName: 'shop', userId: 'ada', sessionId: 's' })).rejects.toMatchObject({
      code: 'BACKEND_ERROR',
    });
    expect(spans()).toMatchObject([
      {
        name: 'adk-state deleteSession',
        status: 2,
        exceptions: 1,
        attributes: { 'adk_state.outcome': 'error', 'error.type': 'BACKEND_ERROR', 'adk_state.may_have_applied': true },
      },
    ]);
  });

  it('records user and session ids only with { recordIds: true }, and nothing with telemetry: false', async () => {
    const withIds = new MemorySessionService({ telemetry: { recordIds: true } });
    await withIds.createSession({ appName: 'shop', userId: 'ada', sessionId: 's9' });
    expect(spans()[0]?.attributes).toMatchObject({ 'adk_state.user_id': 'ada', 'adk_state.session_id': 's9' });
    exporter.reset();
    const silent = new MemorySessionService({ telemetry: false });
    await silent.createSession({ appName: 'shop', userId: 'ada' });
    expect(spans()).toEqual([]);
    expect(() => new MemorySessionService({ telemetry: 'yes' as never })).toThrow(/telemetry/);
  });
});
