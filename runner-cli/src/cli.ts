// Command dispatch and --help. Each command loads only what it needs, so the in-sandbox daemon
// never loads the job database's native module.
import { parseArgs } from 'node:util';
import { ConfigError, flagsToKeys, optionsHelp, parseArgsOptions, readConfigFile, resolveConfig } from './config.js';
import { CLI_VERSION } from './version.js';

const COMMON = ['config_dir', 'data_dir', 'json'];
const LISTEN_KEYS = [
  ...COMMON, 'server_url', 'machine_id', 'machine_token', 'labels', 'launchers', 'concurrency', 'sandbox_lifetime_ms', 'stop_grace_ms',
  'claim_wait_ms', 'claim_min_gap_ms', 'backoff_base_ms', 'backoff_max_ms', 'request_timeout_ms', 'pass_env', 'cost_review_above_cents',
  'log_retention_ms',
  'docker_path', 'docker_image', 'docker_network',
  'e2b_api_key', 'e2b_template', 'e2b_api_url', 'e2b_sandbox_url',
];
const REGISTER_KEYS = [...COMMON, 'server_url', 'registration_token', 'name', 'labels', 'launchers', 'request_timeout_ms'];
const STATUS_KEYS = [...COMMON];

const USAGE = `docket-runner ${CLI_VERSION}: runs Docket agent runs on this machine

Usage:
  docket-runner register --server <url> --token <registration token> [--name n] [--label l]...
  docket-runner listen [--label l]... [--concurrency n] [--launcher process,docker] [--json]
  docket-runner status [--json]
  docket-runner daemon -- <agent command...>      (inside a sandbox; started by listen)

Run \`docket-runner <command> --help\` for a command's options.
Configuration: flags, then DOCKET_* environment variables, then <config-dir>/config.json, then defaults.`;

const COMMANDS: Record<string, { keys: string[]; help: string }> = {
  register: {
    keys: REGISTER_KEYS,
    help: `docket-runner register: register this machine with a Docket deployment.

Sends the name, labels, launch protocols and CLI version with a registration token, and stores the
machine id and machine token in <config-dir>/config.json (directory 0700, file 0600). Registering
again replaces the stored machine.`,
  },
  listen: {
    keys: LISTEN_KEYS,
    help: `docket-runner listen: claim runs and execute them in sandboxes.

Long-polls the server for runs this machine can serve, launches each in a sandbox, keeps its lease,
stops it when a cancel arrives or its lifetime runs out, and reconciles leftover jobs at startup.
Only one listen may use a data directory at a time.

Exit codes: 0 stopped by SIGINT/SIGTERM (sandboxes left for the next start), 1 unexpected error,
2 bad configuration, 3 the server requires an upgrade (426), 4 another listen uses the data
directory, 5 not registered, 6 an admin deregistered this machine (register it again).`,
  },
  status: {
    keys: STATUS_KEYS,
    help: `docket-runner status: the local jobs and their states.

States: queued (claimed, not launched), running, interrupted (the listener stopped while it ran),
reconcile (waits for an operator or the next start), cost-review (the run ended with a cost to look
at; the next listen start says so once more and marks it done), done.`,
  },
  daemon: {
    keys: [],
    help: `docket-runner daemon -- <agent command...>: the in-sandbox wrapper (started by listen).

Reads DOCKET_URL, DOCKET_RUN_ID, DOCKET_ATTEMPT and DOCKET_ATTEMPT_TOKEN from its environment,
starts the agent without the token, relays its output and phases (a line \`::phase implementing\`;
phases are planning, implementing, verifying) as batched reports, and sends the final result: exit
code, the patch against the source revision, and model, limitations and cost_cents from the JSON
file the agent may write at $DOCKET_RESULT_FILE.`,
  },
};

/**
 * `docket-runner status | head -1`: a reader that stopped reading is not an error. Node reports the
 * closed pipe as an 'error' event on stdout, which would otherwise end the process with a stack trace.
 */
export function exitQuietlyOnClosedStdout(stream = process.stdout) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
}

export async function main(argv: string[]): Promise<number> {
  exitQuietlyOnClosedStdout();
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE + '\n');
    return command ? 0 : 2;
  }
  if (command === '--version' || command === 'version') {
    process.stdout.write(CLI_VERSION + '\n');
    return 0;
  }
  const spec = COMMANDS[command];
  if (!spec) {
    process.stderr.write(`docket-runner: unknown command ${JSON.stringify(command)}\n\n${USAGE}\n`);
    return 2;
  }
  if (command === 'daemon') {
    const [{ runDaemon }, { daemonLimitsHelp }] = await Promise.all([import('./daemon.js'), import('./daemon/limits.js')]);
    if (rest[0] === '--help' || rest[0] === '-h') {
      process.stdout.write(`${spec.help}\n\nLimits, from the environment (for tests and unusual agents; the agent never sees them):\n${daemonLimitsHelp()}\n`);
      return 0;
    }
    const code = await runDaemon(rest[0] === '--' ? rest.slice(1) : rest);
    // Exit now: retry timers still pending must not keep the sandbox alive once the result is in.
    await new Promise((resolve) => process.stdout.write('', resolve));
    process.exit(code);
  }
  let values;
  const options = { ...parseArgsOptions(spec.keys), help: { type: 'boolean' as const, short: 'h' } };
  try {
    ({ values } = parseArgs({ args: rest, options, strict: true, allowPositionals: false }));
  } catch (e) {
    const message = parseErrorText(e);
    const hint = didYouMean(e, Object.keys(options));
    process.stderr.write(`docket-runner ${command}: ${message}${hint && (message.endsWith('.') ? ' ' : '. ')}${hint}\nRun \`docket-runner ${command} --help\`.\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${spec.help}\n\nOptions:\n${optionsHelp(spec.keys)}\n`);
    return 0;
  }
  let cfg;
  let file;
  try {
    const flags = flagsToKeys(spec.keys, values);
    const pre = resolveConfig({ flags, env: process.env, keys: ['config_dir'] });
    file = readConfigFile(pre.config_dir);
    cfg = resolveConfig({ flags, env: process.env, file, keys: spec.keys });
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`docket-runner ${command}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const { Output } = await import('./output.js');
  const out = new Output({ json: cfg.json });
  if (command === 'register') return (await import('./commands.js')).register(cfg, file, out);
  if (command === 'status') return (await import('./commands.js')).status(cfg, out);
  return (await import('./commands.js')).listen(cfg, file, out);
}

/** parseArgs's message (`Unknown option '--x'`) in lower case, as every other message here. */
function parseErrorText(e: unknown): string {
  const message = (e as Error).message;
  return message.charAt(0).toLowerCase() + message.slice(1);
}

/** For a mistyped flag, the command's flag it most likely meant (`Did you mean --label?`), or ''. */
function didYouMean(e: unknown, flags: string[]): string {
  if ((e as { code?: string }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return '';
  const typed = /'(?:--?)([^'=]+)/.exec((e as Error).message)?.[1];
  if (!typed) return '';
  let best: { flag: string; d: number } | null = null;
  for (const flag of flags) {
    const d = editDistance(typed, flag);
    if (d <= Math.max(2, Math.floor(flag.length / 3)) && d < typed.length && (!best || d < best.d)) best = { flag, d };
  }
  return best ? `Did you mean --${best.flag}?` : '';
}

/** Levenshtein distance; flags are short, so the plain table is fine. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}
