// Stop at checkpoint and Resume paused run end to end (docs/protocol.md, "Pause and resume";
// runner-cli/README.md, "The agent's side"): a real runner works a run, an operator pauses it, the
// agent checkpoints, and another registered machine continues it from the checkpoint to the end.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { agentScript, allEvents, bareRepo, createOrg, RunnerHome, removeTempDirs, sleep, startDocket, tempDir, waitForRun } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {RunnerHome[]} */
let homes = [];
const scratch = tempDir('scratch');

beforeAll(async () => {
  docket = await startDocket();
}, 120_000);

afterEach(async () => {
  for (const h of homes) await h.cleanup();
  homes = [];
});

afterAll(async () => {
  await docket?.stop();
  removeTempDirs();
});

/** A runner home (its own config and data directory) registered in `org` under `name`. */
function registered(org, name) {
  const home = new RunnerHome();
  homes.push(home);
  const reg = home.run(['register', '--server', docket.url, '--token', org.registration, '--name', name]);
  if (reg.code !== 0) throw new Error(`register ${name}: ${reg.stderr}${reg.stdout}`);
  return home;
}

/**
 * The agent: a first attempt writes notes.txt, starts a helper process and waits; asked to pause
 * (SIGUSR1) it writes its checkpoint, stops its helper and exits. A continuation reads its session
 * from $DOCKET_RESUME_FILE, checks its earlier work is in the work directory, and finishes.
 */
const AGENT = `
  import { spawn } from 'node:child_process';
  import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
  console.log('::phase implementing');
  const resume = process.env.DOCKET_RESUME_FILE;
  if (resume && existsSync(resume)) {
    const cp = JSON.parse(readFileSync(resume, 'utf8'));
    const notes = existsSync('notes.txt') ? readFileSync('notes.txt', 'utf8') : '';
    console.log('resumed session ' + cp.session_id + ' after ' + cp.session.turns + ' turns; earlier work seen: ' + notes.includes('first attempt'));
    appendFileSync('notes.txt', 'second attempt\\n');
    writeFileSync('done.txt', 'finished\\n');
  } else {
    writeFileSync('notes.txt', 'first attempt\\n');
    const helper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    process.on('SIGUSR1', () => {
      writeFileSync(process.env.DOCKET_CHECKPOINT_FILE, JSON.stringify({
        session_id: 'sess-e2e', last_phase: 'implementing', pending_actions: ['finish the notes'], session: { turns: 1 },
      }));
      helper.kill('SIGTERM');
      helper.on('exit', () => process.exit(0));
    });
    console.log('agent ready for a pause');
    setInterval(() => {}, 1000);
  }
`;

/**
 * A call that a connection the local Worker closed while idle (seconds of CLI runs in between) is
 * tried again on: every call here may be repeated (a dispatch carries its Idempotency-Key).
 */
async function api(method, path, opts) {
  for (let tryNo = 1; ; tryNo++) {
    try {
      return await docket.api(method, path, opts);
    } catch (e) {
      if (tryNo >= 3 || !String(e).includes('fetch failed')) throw e;
      await sleep(200);
    }
  }
}

/** Waits until the run's output holds a line containing `text`. */
async function waitForOutput(token, runId, text, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = (await allEvents(docket, token, runId)).filter((e) => e.type === 'run.output').flatMap((e) => e.data.lines);
    if (lines.some((l) => l.includes(text))) return lines;
    if (Date.now() > deadline) throw new Error(`no output line with "${text}" within ${timeoutMs} ms; lines: ${lines.join(' | ')}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

describe('pause and resume across machines', () => {
  it('runner A works the run, the operator pauses it, the checkpoint is stored; after resume runner B restores it and completes the run with both attempts\' work', async () => {
    const org = await createOrg(docket, 'pause-org');
    const repo = bareRepo();
    const agent = agentScript(scratch, AGENT);
    const a = registered(org, 'machine-a');
    const b = registered(org, 'machine-b');
    const listenerA = a.listen();
    const dispatched = await api('POST', '/v1/runs', {
      token: org.admin,
      headers: { 'Idempotency-Key': 'pause-resume-e2e' },
      body: { brief: 'pause me', repository: { url: repo.url, commit: repo.commit }, launch: { protocol: 'process', command: [process.execPath, agent] } },
    });
    expect([200, 201], JSON.stringify(dispatched.body)).toContain(dispatched.status);
    const run = dispatched.body;
    await waitForOutput(org.admin, run.id, 'agent ready for a pause');

    const pause = await api('POST', `/v1/runs/${run.id}/pause`, { token: org.admin, body: { reason: 'operator check' } });
    expect(pause.status).toBe(200);
    expect(pause.body).toMatchObject({ state: 'pausing', hold: true });
    const paused = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'paused', 90_000);
    expect(paused).toMatchObject({ hold: true, continuation: 'implementing', recovery_problem: null, pause_reason: 'operator check' });
    expect(paused.checkpoint).toMatchObject({ attempt: 1, session_id: 'sess-e2e', last_phase: 'implementing', pending_actions: ['finish the notes'], source_revision: repo.commit, note: null });
    expect(paused.checkpoint.patch_chars).toBeGreaterThan(0);
    await listenerA.waitFor((e) => e.event === 'run_ended' && e.outcome === 'paused', 30_000);
    await listenerA.kill('SIGTERM');
    await sleep(3_000); // A's last claim long-poll (CLAIM_WAIT_MS) has ended on the server too: nothing is handed to a machine that left

    const resumed = await api('POST', `/v1/runs/${run.id}/resume`, { token: org.admin, body: {} });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ state: 'queued', hold: false, continuation: 'implementing' });

    b.listen();
    const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed' || r.state === 'failed' || r.state === 'paused', 90_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    // Attempt 1 ran on machine A and paused; the last attempt ran on machine B (a loaded machine may
    // requeue a continuation whose launch was slow in between: each such attempt restores the checkpoint).
    const steps = JSON.stringify(done.steps);
    expect(done.steps[0].outcome, steps).toBe('paused');
    expect(done.steps.at(-1).machine_id, steps).not.toBe(done.steps[0].machine_id);
    expect(done.steps.at(-1).outcome, steps).toBe('completed');
    const lines = await waitForOutput(org.admin, run.id, 'resumed session');
    expect(lines).toContain('resumed session sess-e2e after 1 turns; earlier work seen: true');
    // The final patch is on the original source revision and holds both attempts' work.
    expect(done.artifact.source_revision).toBe(repo.commit);
    expect(done.artifact.patch).toContain('+first attempt');
    expect(done.artifact.patch).toContain('+second attempt');
    expect(done.artifact.patch).toContain('done.txt');
  }, 300_000);
});
