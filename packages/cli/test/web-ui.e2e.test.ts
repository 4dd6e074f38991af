/**
 * `adk-state web` on Redis in a real headless Chromium: the dev UI loads with
 * no network beyond loopback, a message sent from its text box gets the
 * sample agent's reply, and the conversation is stored in Redis. The test
 * keeps a screenshot in .tmp/artifacts/dev-ui.png.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RedisSessionService } from '@adk-state/adapter-redis';
import type { RedisServer } from '@adk-state/test-servers/redis';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, loopbackPage } from './support/browser.js';
import { type CliProcess, serveAgentsOnRedis } from './support/cli-process.js';

const ARTIFACTS = fileURLToPath(new URL('../../../.tmp/artifacts/', import.meta.url));

describe('adk-state web --session_service_uri redis://… in headless Chromium', () => {
  let served: Awaited<ReturnType<typeof serveAgentsOnRedis>>;
  let redis: RedisServer;
  let cli: CliProcess;
  let browser: Browser;

  beforeAll(async () => {
    served = await serveAgentsOnRedis('web');
    ({ redis, cli } = served);
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await served?.stop();
  });

  it('picks the app, sends a message, shows the reply, and the session is in Redis', async () => {
    const page = await loopbackPage(browser, 1280);
    await page.goto(`${cli.url}/`, { waitUntil: 'networkidle' });
    await expect.poll(() => page.url(), { timeout: 30_000 }).toContain('app=greeter');

    const box = page.locator('textarea');
    await box.fill('hello from the browser');
    await box.press('Enter');
    await page.getByText('Noted: hello from the browser (turn 1)').first().waitFor({ timeout: 30_000 });
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}dev-ui.png`, fullPage: true });

    const reader = new RedisSessionService({ url: redis.url });
    try {
      const { sessions } = await reader.listSessions({ appName: 'greeter', userId: 'user' });
      expect(sessions).toHaveLength(1);
      const stored = await reader.getSession({ appName: 'greeter', userId: 'user', sessionId: sessions[0]?.id ?? '' });
      expect(stored?.state.last_reply).toBe('Noted: hello from the browser (turn 1)');
    } finally {
      await reader.close();
    }
    expect(existsSync(`${ARTIFACTS}dev-ui.png`)).toBe(true);
  });
});
