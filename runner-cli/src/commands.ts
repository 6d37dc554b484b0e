// register, status and listen: the commands that talk to the user.
import { basename, isAbsolute, relative, resolve } from 'node:path';
import { ApiError, classify, DocketClient, errorText, retryDelayMs, upgradeHint } from './api.js';
import { configFilePath, ensurePrivateDir, writeConfigFile } from './config.js';
import { formatDuration, type Output } from './output.js';
import type { JobRow } from './jobs.js';
import { CLI_VERSION } from './version.js';

/** Tries register makes when the server is unavailable (503) or cannot be reached, a second apart, then two. */
export const REGISTER_TRIES = 3;

/**
 * The registration, tried again after a 503 (a deployment restarting, a proxy with no Worker behind
 * it yet) or a connection that never reached the server; any other answer is final. Bounded by
 * REGISTER_TRIES, each wait as long as Retry-After asks (at most RETRY_AFTER_MAX_MS).
 */
async function registerTrying(client: DocketClient, cfg: Record<string, any>, out: Output) {
  for (let tries = 1; ; tries += 1) {
    try {
      return await client.register(cfg.registration_token, { name: cfg.name, labels: cfg.labels, protocols: cfg.launchers, cli_version: CLI_VERSION });
    } catch (e) {
      const unavailable = e instanceof ApiError && (e.status === 503 || e.code === 'network');
      if (!unavailable || tries >= REGISTER_TRIES) throw e;
      const waitMs = retryDelayMs(e, 1_000 * 2 ** (tries - 1));
      out.emit('register_retry', `registration: ${errorText(e)}; trying again in ${formatDuration(waitMs)} (try ${tries + 1} of ${REGISTER_TRIES})`, { status: e.status, wait_ms: waitMs });
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }
}

export async function register(cfg: Record<string, any>, file: Record<string, any>, out: Output) {
  const missing = [!cfg.server_url && '--server (or DOCKET_SERVER_URL)', !cfg.registration_token && '--token (or DOCKET_REGISTRATION_TOKEN)'].filter(Boolean);
  if (missing.length) {
    process.stderr.write(`docket-runner register: missing ${missing.join(' and ')}\n`);
    return 2;
  }
  const client = new DocketClient({ serverUrl: cfg.server_url, timeoutMs: cfg.request_timeout_ms });
  let res;
  try {
    res = await registerTrying(client, cfg, out);
  } catch (e) {
    const err = e as any;
    if (classify(e) === 'upgrade') {
      out.emit('upgrade_required', `the server needs a newer runner (${err.body?.min_cli_version ?? '?'}; this is ${CLI_VERSION}) or other launch protocols ` +
        `(it launches ${(err.body?.protocols ?? []).join(', ') || '?'}); to upgrade, ${upgradeHint(e)}`,
        { min_cli_version: err.body?.min_cli_version ?? null, upgrade: upgradeHint(e) });
      return 3;
    }
    if (err?.status === 400 && err?.code === 'invalid_request') {
      // What register sends is its configuration (name, labels, launchers): a retry is refused the same.
      out.emit('bad_configuration', `the server refused the registration (400 invalid_request): ${err.message}`, {
        status: 400, code: err.code, field: typeof err.body?.field === 'string' ? err.body.field : null,
      });
      return 2;
    }
    // A token the server knows says why it no longer works (reason), and one it never issued says so
    // (unknown …); only a refusal that says neither may be of the wrong kind.
    const hint = err?.status === 401 && !err.body?.reason && !/^unknown /.test(err.message ?? '') ? ' (is the token a registration token, dkt_r_…?)' : '';
    out.emit('register_failed', `registration failed: ${errorText(e)}${hint}`, {
      status: err?.status ?? 0, code: err?.code ?? 'error',
    });
    return 1;
  }
  const b = res.body; // decoded by the contract: machine_id and machine_token are there
  const path = writeConfigFile(cfg.config_dir, {
    ...file,
    server_url: cfg.server_url,
    machine_id: b.machine_id,
    machine_token: b.machine_token,
    org_id: b.org_id ?? null,
    name: cfg.name,
    labels: cfg.labels,
    launchers: cfg.launchers,
    registered_at_ms: Date.now(),
    server_config: b.config ?? {},
  });
  const listenCommand = listenCommandLike(cfg);
  out.emit('registered', `registered ${cfg.name} as ${b.machine_id} with ${cfg.server_url}; credentials saved in ${path}. ` +
    `Start it with \`${listenCommand}\`.`, { machine_id: b.machine_id, org_id: b.org_id ?? null, config_file: path, server_url: cfg.server_url,
    listen_command: listenCommand });
  return 0;
}

/**
 * `listen` as the user can type it next: the CLI as they ran it (an installed `docket-runner`, or a
 * checkout's bin by the path they gave, e.g. `node runner-cli/bin/docket-runner.mjs`), looking
 * where register wrote (the same --config-dir, or the same DOCKET_RUNNER_HOME).
 */
export function listenCommandLike(cfg: Record<string, any>, script = process.argv[1] ?? '', cwd = process.cwd()) {
  const cli = basename(script) === 'docket-runner' ? 'docket-runner' : `node ${shellWord(pathFrom(cwd, script))}`;
  const home = shellWord(resolve(cfg.config_dir));
  if (cfg.sources?.config_dir === 'flag') return `${cli} listen --config-dir ${home}`;
  if (cfg.sources?.config_dir === 'env') return `DOCKET_RUNNER_HOME=${home} ${cli} listen`;
  return `${cli} listen`;
}

/** `path` relative to `cwd` when it lies under it, else absolute. */
function pathFrom(cwd: string, path: string) {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : resolve(path);
}

/** A word as a POSIX shell reads it back: as is when plain, else single-quoted. */
export function shellWord(word: string) {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

export async function status(cfg: Record<string, any>, _out: Output) {
  const { JobDb } = await import('./jobs.js');
  const { lockHolder } = await import('./lock.js');
  const holder = lockHolder(cfg.data_dir);
  const db = new JobDb(cfg.data_dir, { readonly: true });
  try {
    const jobs = db.list({ limit: 100 });
    const now = Date.now();
    if (cfg.json) {
      process.stdout.write(JSON.stringify({ kind: 'listener', data_dir: cfg.data_dir, pid: holder?.pid ?? null }) + '\n');
      for (const j of jobs) process.stdout.write(JSON.stringify({ kind: 'job', ...publicJob(j, now) }) + '\n');
      return 0;
    }
    process.stdout.write(holder ? `listener: running (pid ${holder.pid}) on ${cfg.data_dir}\n` : `listener: not running (data ${cfg.data_dir})\n`);
    if (jobs.length === 0) {
      process.stdout.write('no jobs yet\n');
      return 0;
    }
    const rows = jobs.map((j) => {
      const p = publicJob(j, now);
      return [`${p.run_id}#${p.attempt}`, p.state, p.outcome ?? '', p.phase ?? '', formatDuration(p.elapsed_ms ?? -1), p.sandbox_id ?? '', p.reason ?? ''];
    });
    const head = ['RUN', 'STATE', 'OUTCOME', 'PHASE', 'ELAPSED', 'SANDBOX', 'REASON'];
    const widths = head.map((h, i) => Math.min(40, Math.max(h.length, ...rows.map((r) => r[i].length))));
    for (const r of [head, ...rows]) {
      process.stdout.write(r.map((c, i) => (i === r.length - 1 ? c : c.slice(0, widths[i]).padEnd(widths[i]))).join('  ') + '\n');
    }
    return 0;
  } finally {
    db.close();
  }
}

function publicJob(j: JobRow, now: number) {
  const start = j.launched_at_ms ?? j.claimed_at_ms;
  return {
    run_id: j.run_id, attempt: j.attempt, state: j.state, outcome: j.outcome, phase: j.phase, reason: j.reason,
    sandbox_id: j.sandbox_id, protocol: j.protocol, claimed_at_ms: j.claimed_at_ms, launched_at_ms: j.launched_at_ms,
    ended_at_ms: j.ended_at_ms, elapsed_ms: start ? (j.ended_at_ms ?? now) - start : null, cost_cents: j.cost_cents, job_dir: j.job_dir,
  };
}

export async function listen(cfg: Record<string, any>, file: Record<string, any>, out: Output) {
  const { EXIT, Runner } = await import('./runner.js');
  if (!cfg.server_url || !cfg.machine_token) {
    process.stderr.write(`docket-runner listen: this machine is not registered (no server URL or machine token in ${configFilePath(cfg.config_dir)}); ` +
      'run `docket-runner register --server <url> --token <registration token>` first\n');
    return EXIT.notRegistered;
  }
  const { JobDb } = await import('./jobs.js');
  const { acquireLock, LockedError } = await import('./lock.js');
  ensurePrivateDir(cfg.data_dir);
  let release;
  try {
    release = acquireLock(cfg.data_dir);
  } catch (e) {
    if (e instanceof LockedError) {
      // A refusal is an error: stderr, so `listen > log` or a pipe does not swallow it.
      const { Output } = await import('./output.js');
      new Output({ json: cfg.json, stream: process.stderr }).emit('locked', `refusing to start: ${e.message}`, { pid: e.pid, data_dir: cfg.data_dir });
      return EXIT.locked;
    }
    throw e;
  }
  const db = new JobDb(cfg.data_dir);
  const runner = new Runner({ cfg, db, out, fileConfig: file });
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      out.emit('forced_exit', `second ${sig}: exiting now; jobs are reconciled at the next start`, {});
      release?.();
      process.exit(130);
    }
    runner.stop(`received ${sig}; running sandboxes are left for the next start`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await runner.run();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    db.close();
    release();
  }
}
