/**
 * `adk-state inspect` on a session written through the ADK Runner (outputKey,
 * tool state, temp: keys) into Redis: the table, the text and JSON timelines,
 * and the timeline page in headless Chromium, which keeps a screenshot.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RedisSessionService } from '@adk-state/adapter-redis';
import { freePort, type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { Runner } from '@google/adk';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Timeline } from '../src/index.js';
import { rootAgent } from './fixtures/agents/greeter/agent.js';
import { launchBrowser, loopbackPage } from './support/browser.js';
import { runCli, startCli } from './support/cli-process.js';

const ARTIFACTS = fileURLToPath(new URL('../../../.tmp/artifacts/', import.meta.url));

describe('adk-state inspect', () => {
  let redis: RedisServer;
  let sessionId: string;

  beforeAll(async () => {
    redis = await startRedisServer();
    const sessionService = new RedisSessionService({ url: redis.url });
    try {
      const runner = new Runner({ appName: 'greeter', agent: rootAgent, sessionService });
      const session = await sessionService.createSession({
        appName: 'greeter',
        userId: 'ada',
        state: { topic: 'tea' },
      });
      sessionId = session.id;
      for (const text of ['hello', 'again']) {
        for await (const _event of runner.runAsync({
          userId: 'ada',
          sessionId,
          newMessage: { role: 'user', parts: [{ text }] },
        })) {
          // The runner stores every event; the test reads them back through the CLI.
        }
      }
      await sessionService.createSession({ appName: 'greeter', userId: 'bob', sessionId: 'bobs' });
    } finally {
      await sessionService.close();
    }
  }, 60_000);

  afterAll(async () => {
    await redis?.stop();
  });

  it('--json gives state by scope and one entry per event with its changes and the state after it; temp: never shows', async () => {
    const { code, stdout } = await runCli([
      'inspect',
      redis.url,
      '--app',
      'greeter',
      '--user',
      'ada',
      '--session',
      sessionId,
      '--json',
    ]);
    expect(code).toBe(0);
    expect(stdout).not.toContain('temp:');
    const timeline = JSON.parse(stdout) as Timeline;
    expect(timeline.initial).toEqual({ topic: 'tea' });
    expect(timeline.scopes).toEqual({
      session: { topic: 'tea', last_reply: 'Noted: again (turn 2)' },
      user: { 'user:turns': 2 },
      app: {},
    });
    expect(timeline.events.map((entry) => [entry.index, entry.author, entry.calls, entry.text])).toEqual([
      [1, 'user', [], 'hello'],
      [2, 'greeter', ['call count_turn'], undefined],
      [3, 'greeter', ['response count_turn'], undefined],
      [4, 'greeter', [], 'Noted: hello (turn 1)'],
      [5, 'user', [], 'again'],
      [6, 'greeter', ['call count_turn'], undefined],
      [7, 'greeter', ['response count_turn'], undefined],
      [8, 'greeter', [], 'Noted: again (turn 2)'],
    ]);
    expect(timeline.events.map((entry) => entry.changes)).toEqual([
      [],
      [],
      [{ key: 'user:turns', after: 1 }],
      [{ key: 'last_reply', after: 'Noted: hello (turn 1)' }],
      [],
      [],
      [{ key: 'user:turns', before: 1, after: 2 }],
      [{ key: 'last_reply', before: 'Noted: hello (turn 1)', after: 'Noted: again (turn 2)' }],
    ]);
    expect(timeline.events[3]?.stateAfter).toEqual({
      topic: 'tea',
      'user:turns': 1,
      last_reply: 'Noted: hello (turn 1)',
    });
    expect(timeline.events.at(-1)?.stateAfter).toEqual({ ...timeline.scopes.session, ...timeline.scopes.user });
  });

  it('prints the timeline as text, and the sessions of every user as a table', async () => {
    const text = await runCli(['inspect', redis.url, '--app', 'greeter', '--user', 'ada', '--session', sessionId]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('#0 initial: topic="tea"');
    expect(text.stdout).toContain('user:turns: (unset) -> 1');
    expect(text.stdout).toContain('last_reply: "Noted: hello (turn 1)" -> "Noted: again (turn 2)"');
    const table = await runCli(['inspect', redis.url, '--app', 'greeter']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^user\s+session\s+last update/);
    expect(table.stdout).toContain(sessionId);
    expect(table.stdout).toContain('bobs');
  });

  it('fails with one line and exit code 1 for a session that is not there or --session without --user', async () => {
    const missing = await runCli(['inspect', redis.url, '--app', 'greeter', '--user', 'ada', '--session', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no session nope of user ada in app greeter');
    const noUser = await runCli(['inspect', redis.url, '--app', 'greeter', '--session', sessionId]);
    expect(noUser.code).toBe(1);
    expect(noUser.stderr).toContain('--session needs --user');
  });

  describe('--web in headless Chromium', () => {
    let browser: Browser;
    afterAll(async () => {
      await browser?.close();
    });

    it('lists the sessions, shows one row per event of the picked one, and steps through their changes', async () => {
      const port = await freePort();
      const cli = await startCli(
        ['inspect', '--web', redis.url, '--app', 'greeter', '--port', String(port)],
        port,
        'adk-state inspect: serving',
      );
      try {
        browser = await launchBrowser();
        const page = await loopbackPage(browser, 1400);
        await page.goto(cli.url, { waitUntil: 'networkidle' });
        await page.getByText(`ada / ${sessionId}`).click();
        await expect.poll(() => page.locator('tr.event').count(), { timeout: 15_000 }).toBe(8);
        await expect
          .poll(() => page.locator('#detail').textContent(), { timeout: 15_000 })
          .toContain('Noted: again (turn 2)');
        await page.locator('tr.event').nth(2).click();
        await expect
          .poll(() => page.locator('#detail li').first().textContent(), { timeout: 15_000 })
          .toBe('user:turns: (unset) → 1');
        await page.locator('#next').click();
        await expect
          .poll(() => page.locator('#detail li').first().textContent(), { timeout: 15_000 })
          .toContain('last_reply: (unset) →');
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.screenshot({ path: `${ARTIFACTS}inspect.png`, fullPage: true });
        expect(existsSync(`${ARTIFACTS}inspect.png`)).toBe(true);
      } finally {
        expect(await cli.stop('SIGTERM')).toBe(0);
      }
    });

    it("shows an error, not the previous session's timeline, when a session fails to load", async () => {
      const service = new RedisSessionService({ url: redis.url });
      const lone = 'lone \uD800 surrogate';
      try {
        await service.createSession({ appName: 'pages', userId: 'ada', sessionId: 'doomed' });
        await service.createSession({ appName: 'pages', userId: 'ada', sessionId: lone });
        const port = await freePort();
        const cli = await startCli(
          ['inspect', '--web', redis.url, '--app', 'pages', '--port', String(port)],
          port,
          'adk-state inspect: serving',
        );
        try {
          browser ??= await launchBrowser();
          const page = await loopbackPage(browser, 1400);
          await page.goto(cli.url, { waitUntil: 'networkidle' });
          const opened = page.locator('#detail');
          // A session loads: its state shows.
          await page.getByText('ada / doomed').click();
          await expect.poll(() => opened.textContent(), { timeout: 15_000 }).toContain('State');
          await expect.poll(() => opened.getAttribute('class'), { timeout: 15_000 }).not.toBe('error');

          // Deleted since the listing: the page says so, and shows no timeline.
          await service.deleteSession({ appName: 'pages', userId: 'ada', sessionId: 'doomed' });
          await page.getByText('ada / doomed').click();
          await expect
            .poll(() => opened.textContent(), { timeout: 15_000 })
            .toContain('Could not load session ada / doomed: no such session');
          expect(await opened.getAttribute('class')).toBe('error');
          expect(await page.locator('tr.event').count()).toBe(0);

          // An id the page cannot even put in a URL: an error too, not what was there before.
          await page.locator('li.session').filter({ hasText: 'lone' }).click();
          await expect
            .poll(() => opened.textContent(), { timeout: 15_000 })
            .toContain('Could not load session ada / lone');
          expect(await opened.getAttribute('role')).toBe('alert');
        } finally {
          expect(await cli.stop('SIGTERM')).toBe(0);
        }
      } finally {
        await service.close();
      }
    });
  });
});
