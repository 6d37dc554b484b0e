// The dashboard in a real browser: headless Chromium (Debian's, driven by playwright-core) against a
// local Worker, with the real runner CLI working a run (README.md, "Dashboard"). Each page is
// saved as a screenshot under test-results/screenshots/ and checked for accessibility basics:
// every input labelled, text contrast of at least 4.5:1 computed from the rendered colours, and
// keyboard focus reachable with Tab and visibly outlined.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentScript, bareRepo, createOrg, dispatch, removeTempDirs, RunnerHome, ROOT, startDocket, tempDir, waitForRun } from './helpers.mjs';

const SCREENSHOTS = join(ROOT, 'test-results', 'screenshots');

/** Debian's chromium, where `command -v chromium` finds it (CI installs it). */
function findChromium() {
  try {
    const path = execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim();
    return path && existsSync(path) ? path : null;
  } catch {
    return null;
  }
}

const chromiumPath = findChromium();
if (!chromiumPath) console.warn('dashboard browser tests skipped: no chromium on PATH (install Debian\'s chromium; .ci/run does)');

/** Accessibility basics of the page as rendered; each problem is a sentence naming the element. */
function accessibilityProblems() {
  const problems = [];
  const describe = (el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.split(' ').join('.')}` : ''} "${(el.textContent || '').trim().slice(0, 40)}"`;
  // Every form control has a label.
  for (const input of document.querySelectorAll('input, select, textarea')) {
    if (input.type === 'hidden' || input.type === 'submit') continue;
    const labelled = (input.id && document.querySelector(`label[for="${input.id}"]`)) || input.closest('label') || input.getAttribute('aria-label');
    if (!labelled) problems.push(`unlabelled ${describe(input)}`);
  }
  for (const button of document.querySelectorAll('button')) if (!(button.textContent || '').trim() && !button.getAttribute('aria-label')) problems.push(`button without a name ${describe(button)}`);
  // Contrast of every element with text of its own, against the first opaque background behind it.
  const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const c = [r, g, b].map((v) => v / 255).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const [r, g, b, a = 1] = rgb(getComputedStyle(e).backgroundColor);
      if (a > 0) return [r, g, b];
    }
    return [255, 255, 255];
  };
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') || el.closest('.skip')) continue;
    const ownText = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!ownText || getComputedStyle(el).visibility === 'hidden') continue;
    const fg = luminance(rgb(getComputedStyle(el).color));
    const bg = luminance(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < 4.5) problems.push(`contrast ${ratio.toFixed(2)}:1 for ${describe(el)}`);
  }
  // Every SVG picture has a title and a description.
  for (const svg of document.querySelectorAll('svg:not([aria-hidden])')) if (!svg.querySelector('title') || !svg.querySelector('desc')) problems.push('an svg without title and desc');
  return problems;
}

/** Tabs through the page: every link, button and input is reached, and each shows a visible focus outline. */
async function keyboardProblems(page) {
  // Numbered, so two links to the same place count as two stops.
  const focusable = await page.evaluate(() => {
    const all = document.querySelectorAll('a[href], button, input:not([type=hidden])');
    all.forEach((el, i) => el.setAttribute('data-tab-stop', String(i)));
    return all.length;
  });
  const reached = new Set();
  const problems = [];
  for (let i = 0; i < focusable + 2; i++) {
    await page.keyboard.press('Tab');
    const info = await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const style = getComputedStyle(el);
      return { key: `${el.getAttribute('data-tab-stop')} ${el.outerHTML.slice(0, 80)}`, outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
    });
    if (!info) continue;
    reached.add(info.key);
    if (info.outline === 'none' || info.width < 2) problems.push(`no visible focus on ${info.key}`);
  }
  if (reached.size < focusable) problems.push(`Tab reached ${reached.size} of ${focusable} focusable elements`);
  return problems;
}

/**
 * What a phone's narrow window shows badly: a page wider than the window, a table outside its
 * scrolling wrapper, a button taller than two lines of text.
 */
function narrowProblems() {
  const problems = [];
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width) problems.push(`page is ${document.documentElement.scrollWidth} px wide in a ${width} px window`);
  for (const table of document.querySelectorAll('table')) if (!table.parentElement?.classList.contains('table-wrap')) problems.push(`table#${table.id} has no scrolling wrapper`);
  for (const el of document.querySelectorAll('main *')) {
    if (el.closest('.table-wrap') || el.closest('pre')) continue;
    if (el.getBoundingClientRect().right > width + 1) problems.push(`${el.tagName.toLowerCase()} "${(el.textContent || '').trim().slice(0, 30)}" overflows the window`);
  }
  for (const button of document.querySelectorAll('button')) if (button.getBoundingClientRect().height > 3 * parseFloat(getComputedStyle(button).lineHeight)) problems.push(`button "${button.textContent.trim().slice(0, 30)}" is ${button.getBoundingClientRect().height} px tall`);
  return problems;
}

/** Saves the page as test-results/screenshots/<name>.png and checks it. */
async function check(page, name) {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  expect(await page.evaluate(accessibilityProblems), `${name}: accessibility`).toEqual([]);
  expect(await keyboardProblems(page), `${name}: keyboard`).toEqual([]);
}

describe.skipIf(!chromiumPath)('the dashboard in headless Chromium', () => {
  /** @type {Awaited<ReturnType<typeof startDocket>>} */
  let docket;
  /** @type {import('playwright-core').Browser} */
  let browser;
  const home = new RunnerHome();
  const scratch = tempDir('scratch');

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    docket = await startDocket();
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
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
    const longName = 'build-runner-with-a-rather-long-hostname-eu-west-1-rack-7';
    const longReg = await docket.api('POST', '/v1/tokens', { token: org.admin, body: { kind: 'registration' } });
    const longRunner = await docket.api('POST', '/v1/runners/register', { token: longReg.body.token, body: { name: longName, labels: ['linux', 'a-label-that-is-long-enough-to-matter-on-a-phone'], protocols: ['process'], cli_version: '0.1.0' } });
    expect(longRunner.status, JSON.stringify(longRunner.body)).toBe(201);

    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(60_000);
    // Headless Chromium asks for no favicon, so the inline icon is checked in dashboard.test.ts; here, no other error is logged.
    const consoleErrors = [];
    page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(`${page.url()}: ${message.text()}`); });

    // No session: the dashboard sends the browser to sign in.
    await page.goto(`${docket.url}/dash`);
    expect(new URL(page.url()).pathname).toBe('/dash/sign-in');
    await check(page, '01-sign-in');
    await page.getByLabel('Member token').fill('dkt_m_' + '0'.repeat(64));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('That token does not sign in');
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
    expect(await page.locator('svg#chart-depth title').textContent()).toContain('Queue depth');
    await check(page, '02-queue');

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
    await check(page, '03-run-completed');
    await listener.kill('SIGTERM');

    // Cancel the run no runner can take.
    await page.goto(`${docket.url}/dash/runs/${stranded.id}`);
    expect(await page.locator('#run-waiting').textContent()).toContain('lacks labels gpu');
    await check(page, '04-run-queued');
    await page.getByLabel('Reason to cancel').fill('no GPU runner this week');
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.waitForURL(/done=cancel/);
    expect(await page.locator('#run-state').textContent()).toBe('cancelled');
    const cancelled = (await docket.api('GET', `/v1/runs/${stranded.id}`, { token: org.admin })).body;
    expect(cancelled).toMatchObject({ state: 'cancelled', stop_request: { reason: 'no GPU runner this week' } });
    await check(page, '05-run-cancelled');

    // The other pages.
    for (const [path, name, text] of [['/dash/runners', '06-runners', 'rack-1'], ['/dash/credits', '07-credits', 'Cost review'], ['/dash/tokens', '08-tokens', 'Revoke'], ['/dash/managed', '08-managed-runners', 'New pool']]) {
      await page.goto(`${docket.url}${path}`);
      expect(await page.locator('main').textContent()).toContain(text);
      await check(page, name);
    }

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
    await check(page, '09-not-found');
    // The only errors logged are the answers the test asked for: the wrong token's 401 and the two 404s.
    expect(consoleErrors.filter((e) => !/status of (401|404)/.test(e))).toEqual([]);
    expect(consoleErrors.filter((e) => /status of 404/.test(e))).toHaveLength(2);

    // On a phone's narrow window (375 px) nothing is wider than the window: tables scroll in their wrappers, long words break.
    const phone = await browser.newPage({ viewport: { width: 375, height: 800 } });
    phone.setDefaultTimeout(60_000);
    await phone.context().addCookies(await context.cookies());
    for (const [path, name] of [['/dash', 'queue'], ['/dash/runs', 'runs'], [`/dash/runs/${worked.id}`, 'run'], ['/dash/runners', 'runners'], ['/dash/credits', 'credits'], ['/dash/tokens', 'tokens'], ['/dash/managed', 'managed-runners']]) {
      await phone.goto(`${docket.url}${path}`);
      await phone.screenshot({ path: join(SCREENSHOTS, `10-narrow-${name}.png`), fullPage: true });
      expect(await phone.evaluate(narrowProblems), `${path} at 375 px`).toEqual([]);
    }
    await phone.close();

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
    await check(page, '11-session-ended');
    await context.close();
  });
});
