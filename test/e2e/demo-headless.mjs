// `npm run test:demo`: `npm run demo` as a newcomer runs it, headless, for a GitHub issue and then
// (DEMO_TRACKER=linear) for a Linear one. The demo starts Docket (as `npm start` does), the GitHub
// stand-in (and the Linear one), a bare git remote and a runner with the sample agent, and prints
// each step up to the pull request its labelled issue became (for Linear, the issue in review with
// it attached); Ctrl-C (SIGINT to its whole process group, as a terminal sends it) then stops
// everything it started, removes its files and exits 0. Outside `npm test`: most of each demo's
// 30-40 s (more on a busy machine) is Docket starting as `npm start` starts it, migrations and
// wrangler's bundling included.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { groupAlive, ROOT, sleep } from './helpers.mjs';
import { QUIET_ENV } from './migrated-state.mjs';
import { freePort } from './plane-process.mjs';
import { helpOrRefuse, openingComment } from '../../scripts/cli-args.mjs';

helpOrRefuse('npm run test:demo', () => openingComment(import.meta.url));

const startedAt = Date.now();
const step = (text) => process.stdout.write(`test:demo: ${text} (${((Date.now() - startedAt) / 1000).toFixed(1)} s)\n`);

function check(ok, what, detail = '') {
  if (!ok) throw new Error(`${what}${detail ? `\n${detail}` : ''}`);
  step(`ok: ${what}`);
}

/** The demo in a process group of its own, its output collected. */
function demo(env) {
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'demo.mjs')], { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...QUIET_ENV, ...env } });
  const run = { child, out: '', exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) };
  child.stdout.setEncoding('utf8').on('data', (d) => (run.out += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (run.out += d));
  return run;
}

/** The first match of `pattern` in the demo's output, waiting for it while the demo runs. */
async function printed(run, pattern, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = run.out.match(pattern);
    if (match) return match;
    if (run.child.exitCode !== null || run.child.signalCode !== null) throw new Error(`the demo exited before printing ${pattern}:\n${run.out}`);
    if (Date.now() > deadline) throw new Error(`the demo did not print ${pattern} within ${timeoutMs} ms:\n${run.out}`);
    await sleep(200);
  }
}

/** The processes (Linux's /proc) whose command line names `text`: what the demo started, wherever it went. */
function processesNaming(text) {
  if (!existsSync('/proc')) return [];
  return readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
    } catch {
      return false; // gone meanwhile
    }
  });
}

async function main(run, port, tracker) {
  const [, work] = await printed(run, /its files, logs included, are in (\S+)/, 30_000);
  const [, remote] = await printed(run, /made the bare git remote of acme\/widgets: (\S+)/, 30_000);
  await printed(run, new RegExp(`Watch it in the console: http://127\\.0\\.0\\.1:${port}/dash/sign-in`), 240_000);
  step('ok: Docket answered, the project was created and the labelled issue delivered');
  const [, pr, runId] = await printed(run, /pull request opened: #(\d+) \S+ \(the stand-in's\), from branch docket\/(run_\w+)/, 120_000);
  // The sample agent's change is on the run's branch in the remote, as the issue's brief asked.
  const readme = execFileSync('git', ['--git-dir', remote, 'show', `docket/${runId}:README.md`], { encoding: 'utf8' });
  check(readme.trimEnd().endsWith('Hello, world!'), `pull request #${pr} opened from docket/${runId}, whose README ends with the brief's line`, readme);
  if (tracker === 'linear') {
    const [, attached] = await printed(run, /Linear issue ENG-1 moved to In Review, the pull request attached: (\S+)/, 120_000);
    check(attached.endsWith(`/pull/${pr}`), `Linear issue ENG-1 moved to In Review with pull request #${pr} attached`, attached);
  }

  process.kill(-run.child.pid, 'SIGINT');
  const ended = await Promise.race([run.exited, sleep(60_000).then(() => ({ code: 'still running after 60 s', signal: null }))]);
  check(ended.code === 0 && run.out.includes('demo: stopping…') && !/exited \(|its logs are kept/.test(run.out), `Ctrl-C stopped the demo (exit ${ended.code ?? ended.signal})`, run.out);
  check(!existsSync(work), `its directory ${work} is removed`);
  // Nothing it started is left: not in its process group, not anywhere naming its directory.
  for (let i = 0; i < 50 && (groupAlive(run.child.pid) || processesNaming(work).length > 0); i++) await sleep(200);
  check(!groupAlive(run.child.pid), 'no process of its group is left');
  const left = processesNaming(work);
  check(left.length === 0, 'no process naming its directory is left', left.join(' '));
  const answered = await fetch(`http://127.0.0.1:${port}/healthz`).then(() => true, () => false);
  check(!answered, `nothing answers on its port ${port}`);
}

for (const tracker of ['github', 'linear']) {
  step(`DEMO_TRACKER=${tracker}`);
  const port = await freePort();
  const run = demo({ PORT: String(port), DEMO_TRACKER: tracker });
  const passed = await main(run, port, tracker).then(
    () => true,
    (e) => {
      if (groupAlive(run.child.pid)) process.kill(-run.child.pid, 'SIGKILL');
      process.stderr.write(`test:demo: FAILED (DEMO_TRACKER=${tracker}): ${e?.stack ?? e}\n`);
      return false;
    },
  );
  if (!passed) {
    process.exitCode = 1;
    break;
  }
}
if (!process.exitCode) step('passed');
