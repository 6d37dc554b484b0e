// The dashboard in a real browser: headless Chromium (Debian's, driven by playwright-core) against a
// local Worker, with the real runner CLI working a run (README.md, "Dashboard"): sign-in, the queue,
// a run followed live to its end, a cancel, sign-out and an idle session. Each page on the way is
// saved under test-results/screenshots/<width>/ and checked as dashboard-browser.mjs says (axe-core,
// the keyboard, a phone's window); every other page is dashboard-pages.test.mjs's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPage, chromiumPath, launchBrowser, PHONE, WIDE } from './dashboard-browser.mjs';
import { LONG_RUNNER_NAME } from './dashboard-seed.mjs';
import { agentScript, bareRepo, createOrg, dispatch, removeTempDirs, RunnerHome, startDocket, tempDir, waitForRun } from './helpers.mjs';

describe.skipIf(!chromiumPath)('the dashboard in headless Chromium', () => {
  /** @type {Awaited<ReturnType<typeof startDocket>>} */
  let docket;
  /** @type {import('playwright-core').Browser} */
  let browser;
  const home = new RunnerHome();
  const scratch = tempDir('scratch');

  beforeAll(async () => {
    docket = await startDocket();
    browser = await launchBrowser();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await home.cleanup();
    await docket?.stop();
    removeTempDirs();
  });

  // One more try (with a new organization) when a page load stalls past its 60 s on a loaded machine:
  // the browser, the runner and a local Worker share its cores with the rest of the suite.
  it('an operator signs in, sees a queued run and why it waits, watches a runner complete it, opens its diff and cancels another run', { timeout: 300_000, retry: 1 }, async () => {
    const org = await createOrg(docket, 'browser');
    const reg = home.run(['register', '--server', docket.url, '--token', org.registration, '--name', 'rack-1', '--label', 'linux']);
    expect(reg.code, reg.stderr + reg.stdout).toBe(0);
    const repo = bareRepo();
    const agent = agentScript(scratch, `
      import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
      console.log('::phase implementing');
      appendFileSync('README.md', 'world\\n');
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'e2e-model', limitations: [], cost_cents: 42 }));
    `);
    const worked = await dispatch(docket, org.admin, { brief: 'say hello to the world', repository: { url: repo.url, commit: repo.commit }, labels: ['linux'], launch: { protocol: 'process', command: [process.execPath, agent] } });
    const stranded = await dispatch(docket, org.admin, { brief: 'needs a GPU', labels: ['gpu'], launch: { protocol: 'process', command: ['true'] } });

    // A runner with a long name, as a real host's often is: on a phone its row must still fit.
    const longName = LONG_RUNNER_NAME;
    const longReg = await docket.api('POST', '/v1/tokens', { token: org.admin, body: { kind: 'registration' } });
    const longRunner = await docket.api('POST', '/v1/runners/register', { token: longReg.body.token, body: { name: longName, labels: ['linux', 'a-label-that-is-long-enough-to-matter-on-a-phone'], protocols: ['process'], cli_version: '0.1.0' } });
    expect(longRunner.status, JSON.stringify(longRunner.body)).toBe(201);

    const context = await browser.newContext({ viewport: { width: WIDE, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(60_000);
    // Headless Chromium asks for no favicon, so the inline icon is checked in dashboard.test.ts; here, no other error is logged.
    const consoleErrors = [];
    page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(`${page.url()}: ${message.text()}`); });

    // No session: the dashboard sends the browser to sign in.
    await page.goto(`${docket.url}/dash`);
    expect(new URL(page.url()).pathname).toBe('/dash/sign-in');
    await page.getByLabel('Member token').fill('dkt_m_' + '0'.repeat(64));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('That token does not sign in');
    await checkPage(page, 'sign-in-refused');
    await page.getByLabel('Member token').fill(org.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${docket.url}/dash`);
    const cookies = await context.cookies();
    const sessionCookie = cookies.find((c) => c.name === 'docket_session');
    expect(sessionCookie).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict', path: '/dash' });
    // The cookie holds a session id, not the member token.
    expect(sessionCookie.value).not.toContain(org.admin.slice('dkt_m_'.length));

    // The queue, in dispatch order, each run with why it waits.
    const workedRow = page.locator(`#queue tr[data-run="${worked.id}"]`);
    const strandedRow = page.locator(`#queue tr[data-run="${stranded.id}"]`);
    await expect.poll(() => workedRow.textContent()).toContain('next in queue');
    expect(await strandedRow.textContent()).toContain('lacks labels gpu');
    expect(await page.locator('svg#chart-depth > title').textContent()).toContain('Queue depth');

    // The run's page follows it live while the runner works it, through a script file of this
    // origin: the page's policy runs no inline script.
    const runPage = page.waitForResponse(`${docket.url}/dash/runs/${worked.id}`);
    await workedRow.getByRole('link').click();
    await page.waitForURL(`${docket.url}/dash/runs/${worked.id}`);
    const scriptSrc = (await runPage).headers()['content-security-policy'].split(';').map((d) => d.trim()).find((d) => d.startsWith('script-src'));
    expect(scriptSrc).toBe("script-src 'self'");
    expect(await page.locator('#run-state').textContent()).toBe('queued');
    expect(await page.locator('#run-waiting').textContent()).toContain('next in queue');
    const listener = home.listen();
    await page.waitForFunction(() => document.getElementById('run-state')?.textContent === 'completed', null, { timeout: 120_000 });
    await waitForRun(docket, org.admin, worked.id, (r) => r.state === 'completed', 60_000);
    // The run ended: the page reloads with its artifact, drawn as a diff, its attempt and cost.
    await page.locator('#diff').waitFor({ timeout: 60_000 });
    expect(await page.locator('#diff .add').allTextContents()).toContain('+world');
    expect(await page.locator('#run-cost').textContent()).toBe('$0.42');
    expect(await page.locator('svg.timeline g[data-attempt="1"] circle[data-kind="launched"]').count()).toBe(1);
    expect(await page.locator('#events').textContent()).toContain('run.phase');
    await checkPage(page, 'run-completed');
    await listener.kill('SIGTERM');
    // On a phone the attempt timeline keeps its drawn size (its words legible) and scrolls sideways in its own box.
    const phone = await browser.newPage({ viewport: { width: PHONE, height: 800 } });
    await phone.context().addCookies(await context.cookies());
    await phone.goto(`${docket.url}/dash/runs/${worked.id}`);
    expect(await phone.locator('svg.timeline').evaluate((svg) => svg.getBoundingClientRect().width)).toBe(Number(await phone.locator('svg.timeline').getAttribute('width')));
    expect(await phone.locator('.scroll-x').evaluate((box) => box.scrollWidth > box.clientWidth && getComputedStyle(box).overflowX)).toBe('auto');
    await checkPage(phone, 'run-completed');
    await phone.close();

    // Cancel the run no runner can take.
    await page.goto(`${docket.url}/dash/runs/${stranded.id}`);
    expect(await page.locator('#run-waiting').textContent()).toContain('lacks labels gpu');
    await page.getByLabel('Reason to cancel').fill('no GPU runner this week');
    // A destroying action is sent only with its confirmation ticked.
    await page.locator('form', { has: page.getByLabel('Reason to cancel') }).locator('input[name="confirm"]').check();
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.waitForURL(/done=cancel/);
    expect(await page.locator('#run-state').textContent()).toBe('cancelled');
    const cancelled = (await docket.api('GET', `/v1/runs/${stranded.id}`, { token: org.admin })).body;
    expect(cancelled).toMatchObject({ state: 'cancelled', stop_request: { reason: 'no GPU runner this week' } });

    // The runner's button says just "Deregister", and names its runner to a screen reader.
    await page.goto(`${docket.url}/dash/runners`);
    expect(await page.getByRole('button', { name: `Deregister ${longName}` }).textContent()).toBe('Deregister');

    // An unknown page, and a run that does not exist, are the dashboard's own 404 page.
    for (const [path, text] of [['/dash/nope', 'No such page: /dash/nope.'], ['/dash/runs/run_doesnotexist', 'No such run: run_doesnotexist.']]) {
      const answer = await page.goto(`${docket.url}${path}`);
      expect(answer.status(), path).toBe(404);
      expect(await page.locator('h1').textContent(), path).toBe('Not found');
      expect(await page.getByRole('alert').textContent(), path).toContain(text);
    }
    // The only errors logged are the answers the test asked for: the wrong token's 401 and the two 404s.
    expect(consoleErrors.filter((e) => !/status of (401|404)/.test(e))).toEqual([]);
    expect(consoleErrors.filter((e) => /status of 404/.test(e))).toHaveLength(2);

    // Signing out ends the session on the server: a copy of the old cookie opens nothing.
    await page.goto(`${docket.url}/dash`);
    const before = await context.cookies();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${docket.url}/dash/sign-in`);
    expect((await context.cookies()).find((c) => c.name === 'docket_session')).toBeUndefined();
    await context.close();
    const copy = await browser.newContext();
    await copy.addCookies(before);
    const stale = await copy.newPage();
    await stale.goto(`${docket.url}/dash/runs`);
    expect(new URL(stale.url()).pathname).toBe('/dash/sign-in');
    expect(await stale.getByRole('status').textContent()).toBe('Your session ended: sign in again.');
    await copy.close();
  });

  it('a session idle past DASHBOARD_SESSION_IDLE_MS ends: the next page is the sign-in page, saying why', { timeout: 300_000 }, async () => {
    await docket.restart({ DASHBOARD_SESSION_IDLE_MS: '3000', DASHBOARD_SESSION_TOUCH_MS: '1000' });
    const org = await createOrg(docket, 'idle');
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(`${docket.url}/dash/sign-in`);
    await page.getByLabel('Member token').fill(org.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${docket.url}/dash`);
    await page.waitForTimeout(3_500);
    await page.goto(`${docket.url}/dash/runs`);
    expect(page.url()).toBe(`${docket.url}/dash/sign-in?ended=idle`);
    expect(await page.getByRole('status').textContent()).toContain('Your session ended after a time without activity');
    expect((await context.cookies()).find((c) => c.name === 'docket_session')).toBeUndefined();
    await checkPage(page, 'session-ended');
    await context.close();
  });
});
