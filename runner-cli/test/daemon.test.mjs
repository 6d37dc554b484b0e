import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../src/api.ts';
import { runDaemon } from '../src/daemon.ts';
import { daemonLimits } from '../src/daemon/limits.ts';
import { PHASE_LINE } from '../src/daemon/output.ts';
import { ReportBuffer, ReportSequence } from '../src/daemon/report-batches.ts';
import { readResultFile } from '../src/daemon/result.ts';
import { computePatch } from '../src/patch.ts';
import { attemptAnswerBody, RUN_ID } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';

const limits = { maxBatchLines: 3, maxLineChars: 10, maxBufferedLines: 5 };
const dirs = [];
function tmp() {
  const d = mkdtempSync(join(tmpdir(), 'docket-daemon-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('report batching', () => {
  it('sends every phase change in order, each followed by the lines printed under it', () => {
    const b = new ReportBuffer(limits);
    b.push('before');
    b.setPhase('planning');
    b.setPhase('implementing');
    b.push('one');
    b.push('two');
    b.setPhase('implementing'); // no change, no report
    const bodies = [];
    while (b.hasNews) bodies.push(b.take().body);
    expect(bodies).toEqual([{ lines: ['before'] }, { phase: 'planning', lines: [] }, { phase: 'implementing', lines: ['one', 'two'] }]);
  });

  it('bounds a batch, cuts long lines, and keeps the newest lines with a note when the server is away', () => {
    const b = new ReportBuffer(limits);
    for (let i = 0; i < 8; i++) b.push(`line ${i} is long`);
    const first = b.take();
    expect(first.body.lines[0]).toMatch(/3 output lines were dropped/);
    expect(first.body.lines.slice(1)).toEqual(['line 3 is …', 'line 4 is …', 'line 5 is …']);
    b.giveBack(first.batch); // not delivered: nothing is lost twice, the note comes back too
    const again = b.take();
    expect(again.body).toEqual(first.body);
    expect(b.take().body.lines).toEqual(['line 6 is …', 'line 7 is …']);
    expect(b.hasNews).toBe(false);
  });

  it('the phase convention is a line `::phase <name>`', () => {
    expect(PHASE_LINE.exec('::phase verifying')?.[1]).toBe('verifying');
    expect(PHASE_LINE.exec('  ::phase verifying')).toBeNull();
    expect(PHASE_LINE.exec('::phase two words')).toBeNull();
  });
});

describe('report sequence numbers', () => {
  it('a report keeps its seq and body until answered; a 5xx keeps it, a refusal no retry can change drops it', () => {
    const b = new ReportBuffer(limits);
    const seqs = new ReportSequence();
    b.push('one');
    const first = seqs.current(b);
    expect(first).toEqual({ seq: 1, lines: ['one'] });
    b.push('two'); // arrives while seq 1 is in flight: it waits for the next report
    expect(seqs.refused(new ApiError(503, 'internal', 'try later'))).toBe(false);
    expect(seqs.current(b)).toBe(first);
    seqs.answered();
    expect(seqs.current(b)).toEqual({ seq: 2, lines: ['two'] });
    expect(seqs.refused(new ApiError(400, 'invalid_request', 'bad'))).toBe(true);
    expect(seqs.current(b, { final: { outcome: 'completed' } })).toEqual({ seq: 3, lines: [], final: { outcome: 'completed' } });
    // The server already holds a later report (a daemon started over): continue after it.
    expect(seqs.refused(new ApiError(409, 'stale_report', 'older', { code: 'stale_report', last_report_seq: 9 }))).toBe(true);
    expect(seqs.current(b).seq).toBe(10);
  });
});

describe('the result file', () => {
  it('reads model, limitations and cost; a missing file is no result', () => {
    const d = tmp();
    const path = join(d, 'result.json');
    expect(readResultFile(path)).toMatchObject({ model: null, cost_cents: null, cost_uncertain: false });
    writeFileSync(path, JSON.stringify({ model: 'm', limitations: ['a', 3], cost_cents: 42 }));
    expect(readResultFile(path)).toMatchObject({ model: 'm', limitations: ['a'], cost_cents: 42, cost_uncertain: false });
  });

  it('a blocked outcome without a summary or human action is a failure that says why; a long blocker is cut to the default bounds', () => {
    const d = tmp();
    const path = join(d, 'result.json');
    writeFileSync(path, JSON.stringify({ outcome: 'blocked', blocker: { summary: 'stuck' } }));
    expect(readResultFile(path)).toMatchObject({ outcome: 'failed', blocker: null, error: expect.stringMatching(/lacks a summary or a human_action/) });
    writeFileSync(path, JSON.stringify({ outcome: 'blocked' }));
    expect(readResultFile(path)).toMatchObject({ outcome: 'failed', blocker: null, error: expect.stringMatching(/without a blocker object/) });
    writeFileSync(path, JSON.stringify({ outcome: 'blocked', blocker: { summary: 'x'.repeat(5_000), human_action: 'answer', questions: Array.from({ length: 30 }, (_, i) => `q${i}`) } }));
    const read = readResultFile(path);
    expect(read.outcome).toBe('blocked');
    expect(read.blocker.summary).toHaveLength(4_000);
    expect(read.blocker.questions).toHaveLength(20);
    expect(read.blocker.evidence).toEqual([]);
  });

  it('a cost that is not whole non-negative cents is uncertain (the job goes to cost review)', () => {
    const d = tmp();
    const path = join(d, 'result.json');
    writeFileSync(path, JSON.stringify({ cost_cents: 1.5 }));
    expect(readResultFile(path)).toMatchObject({ cost_cents: null, cost_uncertain: true });
    writeFileSync(path, '{not json');
    expect(readResultFile(path)).toMatchObject({ cost_uncertain: true, problem: expect.stringMatching(/not a JSON object/) });
  });
});

function gitRepo() {
  const d = tmp();
  const git = (...args) => spawnSync('git', args, { cwd: d, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@e', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@e' } });
  git('init', '-q');
  writeFileSync(join(d, 'a.txt'), 'a\n');
  git('add', 'a.txt');
  git('commit', '-qm', 'init');
  return { dir: d, rev: git('rev-parse', 'HEAD').stdout.trim(), git };
}

describe('the patch', () => {
  it('holds changed, committed and new files against the source revision, and leaves the index alone', async () => {
    const { dir, rev, git } = gitRepo();
    writeFileSync(join(dir, 'a.txt'), 'a\nb\n');
    writeFileSync(join(dir, 'new.txt'), 'new\n');
    const { patch, problem } = await computePatch(dir, rev);
    expect(problem).toBeNull();
    expect(patch).toContain('+b');
    expect(patch).toContain('new.txt');
    expect(git('status', '--porcelain').stdout).toContain('?? new.txt'); // the real index did not change
  });

  it('is empty without a source revision', async () => {
    expect(await computePatch(tmp(), null)).toEqual({ patch: '', problem: null });
  });
});

/**
 * Runs the daemon with an agent of `source` against `server` as attempt 1 of RUN_ID, with a fresh
 * state directory; `env(state)` adds variables, `cwd` is where the agent runs (the state directory
 * by default). Answers the exit code and the state directory.
 */
async function runAgent(server, source, env = () => ({}), cwd = null) {
  const state = tmp();
  const agent = join(state, 'agent.mjs');
  writeFileSync(agent, source);
  const code = await runDaemon([process.execPath, agent], {
    cwd: cwd ?? state,
    log: () => {},
    echo: () => {},
    env: {
      ...process.env,
      DOCKET_URL: server.url, DOCKET_RUN_ID: RUN_ID, DOCKET_ATTEMPT: '1', DOCKET_ATTEMPT_TOKEN: 'dkt_a_t', DOCKET_STATE_DIR: state,
      ...env(state),
    },
  });
  return { code, state };
}

describe('the daemon against a flaky server', () => {
  it('retries reports through 503s, strips the token from the agent, and delivers the final result once', async () => {
    let n = 0;
    const server = await fakeServer(({ path }) => {
      if (!path.endsWith('/reports')) return { status: 404, body: { error: { code: 'not_found', message: '' } } };
      n += 1;
      if (n <= 2) return { status: 503, body: { error: { code: 'internal', message: 'try later' } } };
      return { status: 200, body: attemptAnswerBody({ state: 'completed', lease_expires_at_ms: null }) };
    });
    const { dir, rev } = gitRepo();
    const source = `
      import { writeFileSync } from 'node:fs';
      console.log('::phase implementing');
      console.log('token=' + (process.env.DOCKET_ATTEMPT_TOKEN ?? 'none'));
      writeFileSync('a.txt', 'changed\\n');
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'm1', cost_cents: 5 }));
    `;
    try {
      const { code, state } = await runAgent(server, source, (stateDir) => ({
        DOCKET_ATTEMPT_TOKEN: 'dkt_a_token', DOCKET_RESULT_FILE: join(stateDir, 'result.json'), DOCKET_SOURCE_REVISION: rev,
        DOCKET_DAEMON_BACKOFF_BASE_MS: '20', DOCKET_DAEMON_BACKOFF_MAX_MS: '40', DOCKET_DAEMON_FLUSH_MS: '20',
      }), dir);
      expect(code).toBe(0);
      const reports = server.requests.filter((r) => r.path === `/v1/runs/${RUN_ID}/reports`);
      expect(reports.every((r) => r.auth === 'Bearer dkt_a_token')).toBe(true);
      const lines = reports.flatMap((r) => r.body.lines ?? []);
      expect(lines).toContain('token=none');
      const finals = reports.filter((r) => r.body.final);
      expect(finals.at(-1).body.final).toMatchObject({
        outcome: 'completed',
        exit_codes: { agent: 0 },
        cost_cents: 5,
        artifact: { source_revision: rev, model: 'm1' },
      });
      expect(finals.at(-1).body.final.artifact.patch).toContain('+changed');
      expect(JSON.parse(readFileSync(join(state, 'final.json'), 'utf8'))).toMatchObject({ delivered: true, answer_state: 'completed' });
    } finally {
      await server.close();
    }
  });

  it('numbers its reports and retries one whose answer was lost with the same seq and body, the final one too', async () => {
    // A server that keeps each accepted seq once, as Docket does, and loses the answer of the first
    // progress report and of the final report after accepting them.
    const accepted = new Map();
    const lose = new Set();
    const server = await fakeServer(({ path, body }) => {
      if (!path.endsWith('/reports')) return { status: 404, body: { error: { code: 'not_found', message: '' } } };
      const answer = { status: 200, body: attemptAnswerBody({ state: body.final ? 'completed' : 'implementing' }) };
      if (accepted.has(body.seq)) return answer;
      accepted.set(body.seq, body);
      if ((body.seq === 1 || body.final) && !lose.has(body.seq)) {
        lose.add(body.seq);
        return { status: 0 };
      }
      return answer;
    });
    try {
      const { code, state } = await runAgent(server, `console.log('first'); setTimeout(() => console.log('second'), 300); setTimeout(() => {}, 600);`, () => ({
        DOCKET_DAEMON_BACKOFF_BASE_MS: '20', DOCKET_DAEMON_BACKOFF_MAX_MS: '40', DOCKET_DAEMON_FLUSH_MS: '20',
      }));
      expect(code).toBe(0);
      const sent = server.requests.filter((r) => r.path === `/v1/runs/${RUN_ID}/reports`).map((r) => r.body);
      // Every try of a seq carries the same body; a new seq only follows an answered one.
      const seqs = sent.map((b) => b.seq);
      expect(seqs[0]).toBe(1);
      for (let i = 1; i < seqs.length; i++) expect([seqs[i - 1], seqs[i - 1] + 1]).toContain(seqs[i]);
      for (const b of sent) expect(b).toEqual(accepted.get(b.seq));
      expect(sent.filter((b) => b.seq === 1)).toHaveLength(2);
      const finalSeq = sent.find((b) => b.final).seq;
      expect(sent.filter((b) => b.seq === finalSeq)).toHaveLength(2);
      // The agent's output reached the server once each.
      const lines = [...accepted.values()].flatMap((b) => b.lines);
      expect(lines.filter((l) => l === 'first')).toHaveLength(1);
      expect(lines.filter((l) => l === 'second')).toHaveLength(1);
      expect(JSON.parse(readFileSync(join(state, 'final.json'), 'utf8'))).toMatchObject({ delivered: true, answer_state: 'completed' });
    } finally {
      await server.close();
    }
  });

  it('an agent that writes a blocker to its result file ends the attempt with outcome blocked and the blocker, even with a non-zero exit code', async () => {
    const server = await fakeServer(({ path }) => {
      if (!path.endsWith('/reports')) return { status: 404, body: { error: { code: 'not_found', message: '' } } };
      return { status: 200, body: attemptAnswerBody({ state: 'blocked', lease_expires_at_ms: null }) };
    });
    const source = `
      import { writeFileSync } from 'node:fs';
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ outcome: 'blocked', blocker: {
        summary: 'Which database should the cache use?', evidence: ['config.yml names two', 7], questions: ['Postgres or SQLite?'],
        human_action: 'Answer on the issue, then add the ready label again',
      } }));
      process.exit(2);
    `;
    try {
      const { code, state } = await runAgent(server, source, (dir) => ({ DOCKET_RESULT_FILE: join(dir, 'result.json'), DOCKET_DAEMON_FLUSH_MS: '20' }));
      expect(code).toBe(0);
      const final = server.requests.filter((r) => r.path === `/v1/runs/${RUN_ID}/reports` && r.body.final).at(-1).body.final;
      expect(final).toMatchObject({
        outcome: 'blocked',
        exit_codes: { agent: 2 },
        blocker: {
          summary: 'Which database should the cache use?',
          evidence: ['config.yml names two'],
          questions: ['Postgres or SQLite?'],
          human_action: 'Answer on the issue, then add the ready label again',
        },
      });
      expect(final.error).toBeUndefined();
      expect(JSON.parse(readFileSync(join(state, 'final.json'), 'utf8'))).toMatchObject({ delivered: true, answer_state: 'blocked' });
    } finally {
      await server.close();
    }
  });

  /** The reports the daemon of an agent that prints nothing and lives `agentMs` sends, and its exit code. */
  async function silentAgentReports(agentMs, env = {}) {
    const server = await fakeServer(({ path, body }) => {
      if (!path.endsWith('/reports')) return { status: 404, body: { error: { code: 'not_found', message: '' } } };
      return { status: 200, body: attemptAnswerBody({ state: body.final ? 'completed' : 'implementing' }) };
    });
    try {
      const { code } = await runAgent(server, `setTimeout(() => {}, ${agentMs});`, () => ({ DOCKET_DAEMON_FLUSH_MS: '20', ...env }));
      return { code, sent: server.requests.filter((r) => r.path === `/v1/runs/${RUN_ID}/reports`).map((r) => r.body) };
    } finally {
      await server.close();
    }
  }

  it('a silent agent\'s first heartbeat is due one interval after the start: a short silent run sends only its final report', async () => {
    const { code, sent } = await silentAgentReports(500);
    expect(code).toBe(0);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ seq: 1, lines: [], final: { outcome: 'completed' } });
  });

  it('a silent agent still gets heartbeat reports, every heartbeat interval', async () => {
    const { code, sent } = await silentAgentReports(2000, { DOCKET_DAEMON_HEARTBEAT_MS: '50' });
    expect(code).toBe(0);
    expect(sent.filter((b) => !b.final).length).toBeGreaterThan(0);
    expect(sent.at(-1).final).toMatchObject({ outcome: 'completed' });
  });

  it('stops the agent and gives up when the server says the attempt is over', async () => {
    const server = await fakeServer(() => ({ status: 410, body: { error: { code: 'task_gone', message: 'run is cancelled' } } }));
    const state = tmp();
    const agent = join(state, 'agent.mjs');
    writeFileSync(agent, `console.log('working'); setInterval(() => {}, 1000);`);
    try {
      const started = Date.now();
      const code = await runDaemon([process.execPath, agent], {
        cwd: state,
        log: () => {},
        echo: () => {},
        env: { ...process.env, DOCKET_URL: server.url, DOCKET_RUN_ID: RUN_ID, DOCKET_ATTEMPT: '1', DOCKET_ATTEMPT_TOKEN: 'dkt_a_t', DOCKET_STATE_DIR: state },
      });
      expect(code).toBe(3);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(JSON.parse(readFileSync(join(state, 'final.json'), 'utf8'))).toMatchObject({ delivered: false, attempt_over: 'task_gone' });
    } finally {
      await server.close();
    }
  });

  it('a refused attempt token (401) ends the attempt at the first refusal, said once: no report is retried, nor the final one', async () => {
    const server = await fakeServer(() => ({ status: 401, body: { error: { code: 'unauthorized', message: 'this run-attempt token is not valid' } } }));
    const env = { DOCKET_DAEMON_BACKOFF_BASE_MS: '20', DOCKET_DAEMON_BACKOFF_MAX_MS: '40', DOCKET_DAEMON_FLUSH_MS: '20' };
    const run = async (source) => {
      const state = tmp();
      const agent = join(state, 'agent.mjs');
      writeFileSync(agent, source);
      const logged = [];
      const code = await runDaemon([process.execPath, agent], {
        cwd: state, log: (s) => logged.push(s), echo: () => {},
        env: { ...process.env, ...env, DOCKET_URL: server.url, DOCKET_RUN_ID: RUN_ID, DOCKET_ATTEMPT: '1', DOCKET_ATTEMPT_TOKEN: 'dkt_a_t', DOCKET_STATE_DIR: state },
      });
      return { code, logged, final: JSON.parse(readFileSync(join(state, 'final.json'), 'utf8')) };
    };
    try {
      // Output while the agent runs: the first report is refused, the agent is stopped, nothing more is sent.
      const running = await run(`console.log('working'); setInterval(() => {}, 1000);`);
      expect(running.code).toBe(3);
      expect(server.requests).toHaveLength(1);
      expect(running.final).toMatchObject({ delivered: false, attempt_over: 'unauthorized' });
      expect(running.logged.filter((l) => l.includes('the attempt token was refused'))).toEqual([
        'docket-runner daemon: the server answered 401 unauthorized (this run-attempt token is not valid): the attempt token was refused; nothing more is sent',
      ]);
      // A silent agent that ends at once: its final report is sent once, not finalTries times.
      const quiet = await run('');
      expect(quiet.code).toBe(3);
      expect(server.requests).toHaveLength(2);
      expect(server.requests[1].body.final).toMatchObject({ outcome: 'completed' });
      expect(quiet.logged.some((l) => l.includes('try 2 of'))).toBe(false);
    } finally {
      await server.close();
    }
  });

  it('reports a missing agent command in its launch handshake', async () => {
    const state = tmp();
    const code = await runDaemon(['/nonexistent/agent'], {
      cwd: state,
      log: () => {},
        echo: () => {},
      env: { DOCKET_URL: 'http://127.0.0.1:9', DOCKET_RUN_ID: 'r', DOCKET_ATTEMPT: '1', DOCKET_ATTEMPT_TOKEN: 't', DOCKET_STATE_DIR: state },
    });
    expect(code).toBe(2);
    expect(JSON.parse(readFileSync(join(state, 'launch.json'), 'utf8'))).toEqual({ ok: false, error: 'agent command not found: /nonexistent/agent' });
  });

  it('has sane default limits', () => {
    expect(daemonLimits({})).toMatchObject({ heartbeatMs: 30_000, maxBatchLines: 200, maxPatchBytes: 4_900_000 });
    expect(daemonLimits({ DOCKET_DAEMON_HEARTBEAT_MS: 'x' }).heartbeatMs).toBe(30_000);
  });
});
