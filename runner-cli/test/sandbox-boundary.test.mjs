// The sandbox boundary on the runner's side (runner-cli/README.md, "The sandbox boundary"): what an
// agent plants in its checkout's git config and hooks, or in the ~/.gitconfig the `process`
// launcher shares with the runner, runs nothing when the daemon reads the agent's patch and the
// runner publishes it; the push lands only at the URL Docket gave; and the push credential is in
// nothing the agent can read.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { computePatch } from '../src/patch.ts';
import { publish } from '../src/publish.ts';
import { attemptAnswerBody, heartbeatAnswer, RUN_ID } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { git, repoWithCheckout } from './helpers/git-remote.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';
import { PLANTS } from './helpers/plants.mjs';

const TOKEN = 'ghs_planted_boundary_token';
/** The token as git would send it: base64 in the Authorization header. */
const HEADER = Buffer.from(`x-access-token:${TOKEN}`).toString('base64');
const BRANCH = `docket/${RUN_ID}`;

const cleanups = [];
const homeBefore = process.env.HOME;
afterEach(async () => {
  process.env.HOME = homeBefore;
  for (const f of cleanups.splice(0).reverse()) await f();
});

const branchAt = (bare) => {
  try {
    return git(['--git-dir', bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${BRANCH}`]);
  } catch {
    return '';
  }
};

/**
 * The URL Docket gives (a bare repository with one commit), a second bare repository a planted
 * rewrite would push to, a checkout of the first as the agent's, a HOME and a markers directory.
 */
function site() {
  const root = mkdtempSync(join(tmpdir(), 'docket-boundary-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const { bare, work, base } = repoWithCheckout(root);
  const evil = join(root, 'elsewhere.git');
  git(['init', '--quiet', '--bare', '--initial-branch=main', evil]);
  const markers = join(root, 'markers');
  const home = join(root, 'home');
  mkdirSync(markers);
  mkdirSync(home);
  return { root, bare, evil, work, markers, home, base };
}

/** Every file under `dirs` that holds the token or its header. */
function filesWithToken(...dirs) {
  const found = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.isFile()) {
        const text = readFileSync(path, 'latin1');
        if (text.includes(TOKEN) || text.includes(HEADER)) found.push(path);
      }
    }
  };
  for (const d of dirs) walk(d);
  return found;
}

/** The Docket API as publish() calls it: the credential for `pushUrl`, and the push reported. */
function docketGiving(pushUrl, base) {
  return {
    async pushCredential() {
      return { body: { token: TOKEN, push_url: pushUrl, branch: BRANCH, source_revision: base } };
    },
    async pushed() {
      return { body: { state: 'publishing' } };
    },
  };
}

describe('git config and hooks the agent planted', () => {
  it.each(Object.keys(PLANTS))('%s: reading the patch and publishing it run nothing planted, push only to the URL Docket gave, and leave the token in no file', async (plant) => {
    const s = site();
    process.env.HOME = s.home; // the HOME the process launcher shares with the agent
    writeFileSync(join(s.work, 'README.md'), 'hello, world\n');
    PLANTS[plant](s);

    // The daemon's final patch (and a checkpoint's) read out of the checkout.
    const { patch, problem } = await computePatch(s.work, s.base);
    expect(problem).toBeNull();
    expect(patch).toContain('+hello, world');
    // The publication.
    const r = await publish(docketGiving(s.bare, s.base), { runId: RUN_ID, attempt: 1, workDir: s.work, cloneDir: join(s.root, 'publish'), timeoutMs: 30_000 });

    expect(readdirSync(s.markers)).toEqual([]);
    expect(branchAt(s.bare)).toBe(r.headSha);
    expect(git(['--git-dir', s.bare, 'show', `${r.headSha}:README.md`])).toBe('hello, world');
    expect(branchAt(s.evil)).toBe('');
    expect(filesWithToken(s.root)).toEqual([]);
  }, 60_000);
});

describe('a run whose agent plants every one of them, end to end with the process launcher', () => {
  it('the daemon and the runner run nothing planted, the branch lands only at the URL Docket gave, and the token is in no file', async () => {
    const s = site();
    const agent = join(s.root, 'agent.mjs');
    writeFileSync(agent, `
      import { writeFileSync } from 'node:fs';
      import { PLANTS } from ${JSON.stringify(new URL('./helpers/plants.mjs', import.meta.url).href)};
      writeFileSync('README.md', 'hello, world\\n');
      const site = { ...${JSON.stringify({ root: s.root, markers: s.markers, bare: s.bare, evil: s.evil })}, work: process.cwd(), home: process.env.HOME };
      for (const plant of Object.values(PLANTS)) plant(site);
    `);
    let claimed = false;
    let state = 'implementing';
    const server = await fakeServer(({ path, body }) => {
      if (path === '/v1/runners/heartbeat') return { status: 200, body: heartbeatAnswer() };
      if (path === '/v1/runners/claim') {
        if (claimed) return { status: 204 };
        claimed = true;
        return { status: 200, body: grant(agent, { url: s.bare, commit: s.base }) };
      }
      if (path.endsWith('/push-credential')) {
        return { status: 200, body: { run_id: RUN_ID, attempt: 1, token: TOKEN, expires_at_ms: Date.now() + 3_600_000, push_url: s.bare, branch: BRANCH, source_revision: s.base, patch_digest: 'sha256-of-the-patch' } };
      }
      if (path.endsWith('/reports') && body?.final) state = 'publishing';
      return { status: 200, body: attemptAnswerBody({ state }) };
    });
    cleanups.push(server.close);
    const home = configuredHome(server.url, 'docket-boundary-home-', cleanups);
    const l = spawnListen(home, [], cleanups);
    const ended = await l.waitFor('run_ended', 90_000);
    await l.kill('SIGTERM');

    expect(ended).toMatchObject({ outcome: 'pushed' });
    const pushed = server.requests.find((r) => r.path.endsWith('/pushed'));
    expect(pushed.body).toEqual({ branch: BRANCH, head_sha: branchAt(s.bare) });
    expect(git(['--git-dir', s.bare, 'show', `${pushed.body.head_sha}:README.md`])).toBe('hello, world');
    expect(branchAt(s.evil)).toBe('');
    // The agent did plant (its ~/.gitconfig is there), and nothing it planted ran.
    expect(readFileSync(join(home, '.gitconfig'), 'utf8')).toContain('fsmonitor');
    expect(readdirSync(s.markers)).toEqual([]);
    expect(filesWithToken(s.root, home)).toEqual([]);
    expect(JSON.stringify(l.events)).not.toContain(TOKEN);
  }, 120_000);
});

/** A claim grant for RUN_ID that checks out `repository` and runs `agent` with the process launcher. */
function grant(agent, repository) {
  return {
    run_id: RUN_ID, attempt: 1, attempt_token: 'dkt_a_t', lease_expires_at_ms: Date.now() + 5000, lease_ttl_ms: 5000, lease_refresh_ms: 300,
    launch_deadline_at_ms: Date.now() + 60_000, sandbox_lifetime_ms: 600_000, brief: 'plant everything', repository,
    launch: { protocol: 'process', command: [process.execPath, agent], image: null, env: {} },
  };
}
