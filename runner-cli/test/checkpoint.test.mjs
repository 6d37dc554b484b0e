// The pause on the runner's side: the daemon's checkpoint flow with a real agent (and the child it
// starts), and the restore and verification of a continuation's checkpoint after a checkout
// (runner-cli/README.md, "The agent's side"; docs/protocol.md, "Pause and resume").
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runDaemon } from '../src/daemon.ts';
import { readCheckpointFile } from '../src/daemon/checkpoint.ts';
import { computePatch } from '../src/patch.ts';
import { CheckpointUnusable, restoreCheckpoint } from '../src/launchers/common.ts';
import { attemptAnswerBody, heartbeatAnswer, RUN_ID } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';

const dirs = [];
const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});
function tmp() {
  const d = mkdtempSync(join(tmpdir(), 'docket-checkpoint-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function gitRepo() {
  const d = tmp();
  const git = (...args) => spawnSync('git', args, { cwd: d, encoding: 'utf8' });
  git('init', '-q');
  git('config', 'user.email', 't@example.com');
  git('config', 'user.name', 't');
  writeFileSync(join(d, 'a.txt'), 'a\n');
  git('add', 'a.txt');
  git('commit', '-qm', 'init');
  return { dir: d, rev: git('rev-parse', 'HEAD').stdout.trim(), git };
}

/** A claim grant for RUN_ID that runs `agent` with the process launcher. */
function grant(agent, fields) {
  return {
    run_id: RUN_ID, attempt_token: 'dkt_a_t', lease_expires_at_ms: Date.now() + 5000, lease_ttl_ms: 5000, lease_refresh_ms: 300,
    launch_deadline_at_ms: Date.now() + 60_000, sandbox_lifetime_ms: 600_000, repository: null,
    launch: { protocol: 'process', command: [process.execPath, agent], image: null, env: {} },
    ...fields,
  };
}

/** A server that takes every report and answers the checkpoint as stored (paused). */
async function pausingServer() {
  return fakeServer(({ path }) => {
    if (path.endsWith('/checkpoint')) return { status: 200, body: attemptAnswerBody({ state: 'paused', lease_expires_at_ms: null }) };
    return { status: 200, body: attemptAnswerBody({ state: 'pausing' }) };
  });
}

function daemonEnv(server, state, rev, extra = {}) {
  return {
    ...process.env,
    DOCKET_URL: server.url, DOCKET_RUN_ID: RUN_ID, DOCKET_ATTEMPT: '1', DOCKET_ATTEMPT_TOKEN: 'dkt_a_token',
    DOCKET_STATE_DIR: state, DOCKET_RESULT_FILE: join(state, 'result.json'), DOCKET_CHECKPOINT_FILE: join(state, 'checkpoint.json'),
    DOCKET_SOURCE_REVISION: rev, AGENT_READY_FILE: join(state, 'agent-ready'),
    DOCKET_DAEMON_BACKOFF_BASE_MS: '20', DOCKET_DAEMON_BACKOFF_MAX_MS: '40', DOCKET_DAEMON_FLUSH_MS: '20',
    ...extra,
  };
}

/** The agents below say when their SIGUSR1 handler is in place (a loaded machine starts node slowly). */
const READY = `writeFileSync(process.env.AGENT_READY_FILE, 'ready');`;

/** Waits until the agent is ready, then delivers the runner's pause to the daemon. */
async function pauseOnceLaunched(state) {
  for (let i = 0; i < 2_000 && !existsSync(join(state, 'agent-ready')); i++) await new Promise((r) => setTimeout(r, 25));
  process.emit('SIGUSR1', 'SIGUSR1'); // what the runner's `kill -USR1 <daemon>` delivers
}

describe('the daemon on a pause (SIGUSR1)', () => {
  it('asks the agent to checkpoint, waits for the agent and its child to exit, and uploads the checkpoint with the whole work', async () => {
    const server = await pausingServer();
    const { dir, rev } = gitRepo();
    const state = tmp();
    const agent = join(state, 'agent.mjs');
    // The agent starts a child that outlives it by a moment and then writes a file: the daemon must
    // wait for it, or that file would be missing from the checkpoint's patch.
    writeFileSync(agent, `
      import { spawn } from 'node:child_process';
      import { writeFileSync } from 'node:fs';
      console.log('::phase implementing');
      writeFileSync('work.txt', 'first attempt\\n');
      spawn(process.execPath, ['-e', "setTimeout(() => { require('fs').writeFileSync('child.txt', 'late\\\\n'); }, 800)"], { stdio: 'ignore' });
      process.on('SIGUSR1', () => {
        writeFileSync(process.env.DOCKET_CHECKPOINT_FILE, JSON.stringify({
          session_id: 'sess-1', last_phase: 'implementing', pending_actions: ['run the tests'], session: { turns: 2 },
        }));
        process.exit(0);
      });
      ${READY}
      setInterval(() => {}, 1000);
    `);
    try {
      const [code] = await Promise.all([
        runDaemon([process.execPath, agent], { cwd: dir, log: () => {}, echo: () => {}, env: daemonEnv(server, state, rev) }),
        pauseOnceLaunched(state),
      ]);
      expect(code).toBe(4);
      const uploads = server.requests.filter((r) => r.path === `/v1/runs/${RUN_ID}/attempts/1/checkpoint`);
      expect(uploads).toHaveLength(1);
      expect(uploads[0].auth).toBe('Bearer dkt_a_token');
      expect(uploads[0].body).toMatchObject({
        session_id: 'sess-1',
        last_phase: 'implementing',
        pending_actions: ['run the tests'],
        session: { turns: 2 },
        source_revision: rev,
        note: null,
      });
      expect(uploads[0].body.patch).toContain('+first attempt');
      expect(uploads[0].body.patch).toContain('child.txt');
      // A pause is not a result: no final report was sent.
      expect(server.requests.some((r) => r.body?.final)).toBe(false);
      expect(JSON.parse(readFileSync(join(state, 'final.json'), 'utf8'))).toMatchObject({ delivered: false, checkpoint_delivered: true, answer_state: 'paused' });
    } finally {
      await server.close();
    }
  }, 60_000);

  it('stops an agent that ignores the request after the grace, and still uploads the work, saying so', async () => {
    const server = await pausingServer();
    const { dir, rev } = gitRepo();
    const state = tmp();
    const agent = join(state, 'agent.mjs');
    writeFileSync(agent, `
      import { writeFileSync } from 'node:fs';
      writeFileSync('work.txt', 'stubborn\\n');
      process.on('SIGUSR1', () => {});
      ${READY}
      setInterval(() => {}, 1000);
    `);
    try {
      const env = daemonEnv(server, state, rev, { DOCKET_DAEMON_CHECKPOINT_GRACE_MS: '500', DOCKET_DAEMON_STOP_GRACE_MS: '500' });
      const [code] = await Promise.all([
        runDaemon([process.execPath, agent], { cwd: dir, log: () => {}, echo: () => {}, env }),
        pauseOnceLaunched(state),
      ]);
      expect(code).toBe(4);
      const upload = server.requests.find((r) => r.path.endsWith('/checkpoint'));
      expect(upload.body).toMatchObject({ session_id: null, session: null });
      expect(upload.body.note).toContain('did not exit within 500 ms');
      expect(upload.body.note).toContain('no checkpoint file');
      expect(upload.body.patch).toContain('+stubborn');
    } finally {
      await server.close();
    }
  }, 60_000);

  it('reports a refused checkpoint as undelivered, so the runner never calls the run paused', async () => {
    const server = await fakeServer(({ path }) =>
      path.endsWith('/checkpoint')
        ? { status: 409, body: { error: { code: 'invalid_transition', message: 'run is implementing', state: 'implementing' } } }
        : { status: 200, body: attemptAnswerBody() });
    const { dir, rev } = gitRepo();
    const state = tmp();
    const agent = join(state, 'agent.mjs');
    writeFileSync(agent, `import { writeFileSync } from 'node:fs'; process.on('SIGUSR1', () => process.exit(0)); ${READY} setInterval(() => {}, 1000);`);
    try {
      const [code] = await Promise.all([
        runDaemon([process.execPath, agent], { cwd: dir, log: () => {}, echo: () => {}, env: daemonEnv(server, state, rev) }),
        pauseOnceLaunched(state),
      ]);
      expect(code).toBe(1);
      expect(server.requests.filter((r) => r.path.endsWith('/checkpoint'))).toHaveLength(1);
      expect(JSON.parse(readFileSync(join(state, 'final.json'), 'utf8'))).toMatchObject({ checkpoint_delivered: false });
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe("the agent's checkpoint file", () => {
  it('naming a session it does not carry is stored without the session, saying why, so the continuation can still resume the work', () => {
    const file = join(tmp(), 'checkpoint.json');
    writeFileSync(file, JSON.stringify({ session_id: 'sess-9', last_phase: 'implementing', pending_actions: ['push'] }));
    expect(readCheckpointFile(file)).toEqual({
      session_id: null, last_phase: 'implementing', pending_actions: ['push'], session: null,
      problem: expect.stringContaining('names session sess-9 but carries no "session"'),
    });
    writeFileSync(file, JSON.stringify({ session_id: 'sess-9', session: { turns: 1 } }));
    expect(readCheckpointFile(file)).toMatchObject({ session_id: 'sess-9', session: { turns: 1 }, problem: null });
  });
});

describe("restoring a continuation's checkpoint", () => {
  /** A checkpoint made in one clone, and a fresh clone (a later commit on top) to restore it into. */
  async function checkpointAndFreshClone() {
    const origin = gitRepo();
    const first = tmp();
    spawnSync('git', ['clone', '-q', origin.dir, first]);
    writeFileSync(join(first, 'a.txt'), 'a\nmore\n');
    writeFileSync(join(first, 'notes.txt'), 'first attempt\n');
    const { patch } = await computePatch(first, origin.rev);
    // The remote moved on after the pause: the continuation must still start from the source revision.
    writeFileSync(join(origin.dir, 'b.txt'), 'later\n');
    origin.git('add', 'b.txt');
    origin.git('commit', '-qm', 'later');
    const job = tmp();
    const paths = { workDir: join(job, 'work'), stateDir: join(job, 'docket') };
    mkdirSync(paths.stateDir, { recursive: true });
    spawnSync('git', ['clone', '-q', origin.dir, paths.workDir]);
    const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: paths.workDir, encoding: 'utf8' }).stdout.trim();
    const checkpoint = {
      attempt: 1, session_id: 'sess-1', last_phase: 'implementing', pending_actions: ['run the tests'],
      session: JSON.stringify({ turns: 2 }), patch, source_revision: origin.rev, note: null, at_ms: 1,
    };
    return { origin, paths, head, checkpoint };
  }
  const opts = { timeoutMs: 30_000 };

  it('checks out the source revision, applies the work and writes the session to resume.json', async () => {
    const { origin, paths, head, checkpoint } = await checkpointAndFreshClone();
    const revision = await restoreCheckpoint(checkpoint, head, paths, opts);
    expect(revision).toBe(origin.rev);
    expect(readFileSync(join(paths.workDir, 'notes.txt'), 'utf8')).toBe('first attempt\n');
    expect(readFileSync(join(paths.workDir, 'a.txt'), 'utf8')).toBe('a\nmore\n');
    expect(existsSync(join(paths.workDir, 'b.txt'))).toBe(false);
    const resume = JSON.parse(readFileSync(join(paths.stateDir, 'resume.json'), 'utf8'));
    expect(resume).toMatchObject({ attempt: 1, session_id: 'sess-1', session: { turns: 2 }, pending_actions: ['run the tests'], source_revision: origin.rev });
    expect(resume.patch).toBeUndefined();
  });

  it('refuses a patch that does not apply, naming it', async () => {
    const { paths, head, checkpoint } = await checkpointAndFreshClone();
    const broken = { ...checkpoint, patch: checkpoint.patch.replace(' a\n+more', ' not there\n+more') };
    await expect(restoreCheckpoint(broken, head, paths, opts)).rejects.toThrow(CheckpointUnusable);
    await expect(restoreCheckpoint(broken, head, paths, opts)).rejects.toThrow(/does not apply/);
  });

  it('refuses a source revision the checkout cannot reach', async () => {
    const { paths, head, checkpoint } = await checkpointAndFreshClone();
    const gone = { ...checkpoint, source_revision: 'f'.repeat(40) };
    await expect(restoreCheckpoint(gone, head, paths, opts)).rejects.toThrow(/not reachable/);
  });

  it('refuses a checkpoint that names a session it does not carry, or carries one that is not JSON', async () => {
    const { paths, head, checkpoint } = await checkpointAndFreshClone();
    await expect(restoreCheckpoint({ ...checkpoint, session: null }, head, paths, opts)).rejects.toThrow(/carries no session/);
    await expect(restoreCheckpoint({ ...checkpoint, session: '{oops' }, head, paths, opts)).rejects.toThrow(/not readable JSON/);
  });
});

describe('the runner on a pause', () => {
  it('ends the job paused once the checkpoint is stored, and never calls the lease the pause ends a failure', async () => {
    const dir = tmp();
    const ready = join(dir, 'agent-ready');
    const agent = join(dir, 'agent.mjs');
    writeFileSync(agent, `
      import { writeFileSync } from 'node:fs';
      // Checkpointing takes a while, so the runner's next lease call waits at the server meanwhile.
      process.on('SIGUSR1', () => setTimeout(() => {
        writeFileSync(process.env.DOCKET_CHECKPOINT_FILE, JSON.stringify({ session_id: 's', last_phase: 'implementing', pending_actions: [], session: {} }));
        process.exit(0);
      }, 1_500));
      writeFileSync(${JSON.stringify(ready)}, 'ready');
      setInterval(() => {}, 1000);
    `);
    let claimed = false;
    let pauseSent = false;
    let paused = false;
    /** Lease waits the server holds until the run is paused, as a real one answers a waiting call at a change. */
    const held = [];
    const refused = () => ({ status: 409, body: { error: { code: 'invalid_transition', message: `run ${RUN_ID} is paused`, state: 'paused' } } });
    const server = await fakeServer(async ({ path }) => {
      if (path === '/v1/runners/heartbeat') return { status: 200, body: heartbeatAnswer() };
      if (path === '/v1/runners/claim') {
        if (claimed) return { status: 204 };
        claimed = true;
        return { status: 200, body: grant(agent, { attempt: 1, brief: 'pause me' }) };
      }
      if (path.endsWith('/checkpoint')) {
        // The run is paused the moment the checkpoint is stored; its answer reaches the daemon a little later.
        paused = true;
        for (const release of held.splice(0)) release(refused());
        await new Promise((r) => setTimeout(r, 500));
        return { status: 200, body: attemptAnswerBody({ state: 'paused', lease_expires_at_ms: null }) };
      }
      if (path.endsWith('/launched') || path.endsWith('/lease')) {
        if (paused) return refused();
        // The pause comes on a lease call once the agent listens for it (never on `launched`, so a
        // lease call always follows it); until the checkpoint, calls wait.
        if (path.endsWith('/launched') || !existsSync(ready)) return { status: 200, body: attemptAnswerBody() };
        if (!pauseSent) {
          pauseSent = true;
          return { status: 200, body: attemptAnswerBody({ state: 'pausing', pause_requested: true }) };
        }
        return new Promise((resolve) => held.push(resolve));
      }
      return { status: 200, body: attemptAnswerBody({ state: 'pausing' }) };
    });
    cleanups.push(server.close);
    const home = configuredHome(server.url, 'docket-pause-', cleanups);
    const l = spawnListen(home, [], cleanups);
    const ended = await l.waitFor('run_ended', 60_000);
    expect(ended).toMatchObject({ outcome: 'paused', reason: 'checkpoint stored' });
    expect(ended.message).toContain('ended: paused (checkpoint stored)');
    expect(l.events.map((e) => e.event)).toContain('pause_requested');
    // The lease refused because the run is paused is the pause's end, not a failure to retry.
    expect(l.events.filter((e) => e.event === 'lease_retry')).toEqual([]);
    expect(server.requests.filter((r) => r.path.endsWith('/stopped'))).toEqual([]);
    // The test made the case it means to: a lease call was answered with the refusal.
    expect(server.requests.filter((r) => r.path.endsWith('/lease')).length).toBeGreaterThan(1);
    await l.kill('SIGTERM');
  }, 120_000);
});

describe('the runner with a continuation whose checkpoint does not verify', () => {
  it('reports checkpoint-unusable with the reason and never launches the agent', async () => {
    const origin = gitRepo();
    const marker = join(tmp(), 'agent-ran');
    const agent = join(tmp(), 'agent.cjs');
    writeFileSync(agent, `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran');`);
    let claimed = false;
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return { status: 200, body: heartbeatAnswer() };
      if (path === '/v1/runners/claim') {
        if (claimed) return { status: 204 };
        claimed = true;
        return {
          status: 200,
          body: grant(agent, { attempt: 2, brief: 'continue', repository: { url: origin.dir, commit: origin.rev },
            checkpoint: {
              attempt: 1, session_id: null, last_phase: 'implementing', pending_actions: [], session: null,
              patch: 'diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-not what is there\n+b\n',
              source_revision: origin.rev, note: null, at_ms: 1,
            },
          }),
        };
      }
      if (path.endsWith('/checkpoint-unusable')) return { status: 200, body: attemptAnswerBody({ attempt: 2, state: 'paused', lease_expires_at_ms: null }) };
      return { status: 200, body: attemptAnswerBody({ attempt: 2 }) };
    });
    cleanups.push(server.close);
    const home = configuredHome(server.url, 'docket-checkpoint-', cleanups);
    const l = spawnListen(home, [], cleanups);
    const ended = await l.waitFor('run_ended', 60_000);
    expect(ended).toMatchObject({ outcome: 'checkpoint_unusable' });
    const report = server.requests.find((r) => r.path === `/v1/runs/${RUN_ID}/attempts/2/checkpoint-unusable`);
    expect(report.auth).toBe('Bearer dkt_s_t');
    expect(report.body.reason).toContain('does not apply');
    expect(server.requests.some((r) => r.path.endsWith('/launched') || r.path.endsWith('/launch-failed'))).toBe(false);
    expect(existsSync(marker)).toBe(false);
    await l.kill('SIGTERM');
  }, 120_000);
});
