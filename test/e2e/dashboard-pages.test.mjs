// Every page of the dashboard in a real browser (headless Debian chromium, driven by playwright-core)
// at a laptop's 1280 px and a phone's 390 px (README.md, "Dashboard"): each saved as
// test-results/screenshots/<width>/<page>.png, checked with axe-core (no violation of impact serious
// or critical), with the keyboard on the wide window, and on the phone for what sits off-screen
// outside a scrolling box and for lists shown as cards. One Docket, one organization seeded once
// through the API (dashboard-seed.mjs), one browser.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPage, chromiumPath, launchBrowser, PHONE, WIDE } from './dashboard-browser.mjs';
import { LONG_RUNNER_NAME, seedConsole } from './dashboard-seed.mjs';
import { dispatch, removeTempDirs, startDocket } from './helpers.mjs';

/** Each page: its screenshot's name, its path (from the seeded ids), its status and a text it shows. */
const PAGES = [
  ['queue', () => '/dash', 200, () => 'Queue'],
  ['runs', () => '/dash/runs', 200, (s) => s.queuedRun],
  ['runs-filtered', (s) => `/dash/runs?state=cancelled&project_id=${s.githubProject.id}`, 200, () => 'Runs'],
  ['run-queued', (s) => `/dash/runs/${s.queuedRun}`, 200, (s) => s.queuedRun],
  ['run-cancelled', (s) => `/dash/runs/${s.cancelledRun}`, 200, () => 'no GPU runner this week'],
  ['run-of-a-ticket', (s) => `/dash/runs/${s.githubProject.runId}`, 200, () => 'dark mode toggle'],
  ['runners', () => '/dash/runners', 200, () => LONG_RUNNER_NAME],
  ['runner', (s) => `/dash/runners/${s.machineId}`, 200, () => 'rack-1'],
  ['tokens', () => '/dash/tokens', 200, () => 'a member of the team'],
  ['credits', () => '/dash/credits', 200, () => 'Cost review'],
  ['autopilot', () => '/dash/autopilot', 200, () => 'eng from linear'],
  ['autopilot-new', () => '/dash/autopilot/new', 200, () => 'App private key (PEM)'],
  ['project-github', (s) => `/dash/autopilot/${s.githubProject.id}`, 200, () => 'widgets'],
  ['project-linear', (s) => `/dash/autopilot/${s.linearProject.id}`, 200, () => 'eng from linear'],
  ['ticket', (s) => `/dash/autopilot/${s.githubProject.id}/tickets/${s.githubProject.ticket}`, 200, (s) => s.githubProject.runId],
  ['ticket-refused', (s) => `/dash/autopilot/${s.githubProject.id}/tickets/8`, 200, () => 'renovate[bot]'],
  ['managed-runners', () => '/dash/managed', 200, () => 'New pool'],
  ['not-found', () => '/dash/nope', 404, () => 'No such page: /dash/nope.'],
];

describe.skipIf(!chromiumPath)('every page of the dashboard in headless Chromium', () => {
  /** @type {Awaited<ReturnType<typeof startDocket>>} */
  let docket;
  /** @type {Awaited<ReturnType<typeof seedConsole>>} */
  let seed;
  /** @type {import('playwright-core').Browser} */
  let browser;
  /** One signed-in tab per width. @type {Record<number, import('playwright-core').Page>} */
  const tabs = {};

  beforeAll(async () => {
    // Live lists refresh every second here, so a new run shows within the test's patience.
    docket = await startDocket({ DASHBOARD_LIVE_POLL_MS: '1000' });
    seed = await seedConsole(docket);
    browser = await launchBrowser();
    for (const width of [WIDE, PHONE]) {
      const tab = await browser.newPage({ viewport: { width, height: 900 } });
      tab.setDefaultTimeout(60_000);
      await tab.goto(`${docket.url}/dash/sign-in`);
      await tab.getByLabel('Member token').fill(seed.org.admin);
      await tab.getByRole('button', { name: 'Sign in' }).click();
      await tab.waitForURL(`${docket.url}/dash`);
      tabs[width] = tab;
    }
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await seed?.close();
    await docket?.stop();
    removeTempDirs();
  });

  for (const width of [WIDE, PHONE]) {
    it(`at ${width} px the sign-in page passes axe's serious and critical rules`, { timeout: 60_000 }, async () => {
      const tab = await browser.newPage({ viewport: { width, height: 900 } });
      await tab.goto(`${docket.url}/dash/sign-in`);
      expect(await tab.getByLabel('Member token').count()).toBe(1);
      await checkPage(tab, 'sign-in');
      await tab.close();
    });

    for (const [name, path, status, text] of PAGES) {
      const what = width === PHONE
        ? `at ${width} px the ${name} page passes axe's serious and critical rules, nothing in main is off-screen outside a scrolling box, and each list is cards`
        : `at ${width} px the ${name} page passes axe's serious and critical rules and every control is reached with Tab`;
      it(what, { timeout: 90_000 }, async () => {
        const tab = tabs[width];
        const answer = await tab.goto(`${docket.url}${path(seed)}`);
        expect(answer.status(), path(seed)).toBe(status);
        expect(await tab.locator('main').textContent()).toContain(text(seed));
        await checkPage(tab, name);
      });
    }
  }

  it('the queue page shows a run dispatched through the API without a reload', { timeout: 60_000 }, async () => {
    const tab = tabs[WIDE];
    await tab.goto(`${docket.url}/dash`);
    // A mark on the window: a reload would take it away.
    await tab.evaluate(() => { window.__sameDocument = true; });
    const run = await dispatch(docket, seed.org.admin, { brief: 'a run dispatched while the queue was open', labels: ['gpu'], launch: { protocol: 'process', command: ['true'] } });
    await expect.poll(() => tab.locator('#queue').textContent(), { timeout: 30_000 }).toContain(run.id);
    expect(await tab.evaluate(() => window.__sameDocument)).toBe(true);
  });
});
