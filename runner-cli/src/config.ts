// Configuration: flags > environment (DOCKET_*) > config file > defaults. The option table below is
// the single source for flag parsing, environment names, the config file keys and --help text.
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';

export type OptionType = 'string' | 'int' | 'list' | 'bool';
/** `min` and `max` bound an int option (min defaults to 0). */
export type OptionSpec = {
  key: string; flag: string; env?: string; file?: boolean; type: OptionType; default?: any; help: string; min?: number; max?: number;
};

export const OPTIONS: Record<string, OptionSpec> = {
  config_dir: { key: 'config_dir', flag: 'config-dir', env: 'DOCKET_RUNNER_HOME', type: 'string',
    help: 'where config.json (machine credentials) lives; default ~/.config/docket-runner' },
  data_dir: { key: 'data_dir', flag: 'data-dir', env: 'DOCKET_DATA_DIR', file: true, type: 'string',
    help: 'job database, lock file and per-run work directories; default <config-dir>/data' },
  server_url: { key: 'server_url', flag: 'server', env: 'DOCKET_SERVER_URL', file: true, type: 'string',
    help: 'the Docket deployment, e.g. http://127.0.0.1:8787' },
  registration_token: { key: 'registration_token', flag: 'token', env: 'DOCKET_REGISTRATION_TOKEN', type: 'string',
    help: 'a registration token (dkt_r_...) from POST /v1/tokens; used once, never stored' },
  machine_id: { key: 'machine_id', flag: 'machine-id', env: 'DOCKET_MACHINE_ID', file: true, type: 'string',
    help: 'the machine id from registration (normally read from config.json)' },
  machine_token: { key: 'machine_token', flag: 'machine-token', env: 'DOCKET_MACHINE_TOKEN', file: true, type: 'string',
    help: 'the machine token from registration (normally read from config.json)' },
  name: { key: 'name', flag: 'name', env: 'DOCKET_RUNNER_NAME', file: true, type: 'string',
    help: 'the machine name shown in GET /v1/runners; default the host name' },
  labels: { key: 'labels', flag: 'label', env: 'DOCKET_LABELS', file: true, type: 'list', default: [],
    help: 'a label this machine serves (repeatable, or comma-separated); a run is claimed only if all its labels are here' },
  launchers: { key: 'launchers', flag: 'launcher', env: 'DOCKET_LAUNCHER', file: true, type: 'list', default: ['process'],
    help: 'launch protocols to serve: process, docker, e2b (comma-separated); default process' },
  concurrency: { key: 'concurrency', flag: 'concurrency', env: 'DOCKET_CONCURRENCY', file: true, type: 'int', default: 1, min: 1,
    help: 'how many runs at once; default 1' },
  sandbox_lifetime_ms: { key: 'sandbox_lifetime_ms', flag: 'sandbox-lifetime-ms', env: 'DOCKET_SANDBOX_LIFETIME_MS', file: true,
    type: 'int', help: "cap on a sandbox's lifetime; the server's sandbox_lifetime_ms (default 600000) applies when lower or when unset" },
  stop_grace_ms: { key: 'stop_grace_ms', flag: 'stop-grace-ms', env: 'DOCKET_STOP_GRACE_MS', file: true, type: 'int', default: 10_000,
    help: 'time between SIGTERM and SIGKILL when stopping a sandbox; default 10000' },
  // The claim's wait_ms is at most 600000 (ClaimBody, src/protocol/runners.ts).
  claim_wait_ms: { key: 'claim_wait_ms', flag: 'claim-wait-ms', env: 'DOCKET_CLAIM_WAIT_MS', file: true, type: 'int', max: 600_000,
    help: "long-poll wait per claim; default the server's claim_wait_ms" },
  claim_min_gap_ms: { key: 'claim_min_gap_ms', flag: 'claim-min-gap-ms', env: 'DOCKET_CLAIM_MIN_GAP_MS', file: true, type: 'int', default: 1_000,
    help: 'the least time between the starts of two claims, so an answer that comes back at once never makes a tight loop; default 1000' },
  backoff_base_ms: { key: 'backoff_base_ms', flag: 'backoff-base-ms', env: 'DOCKET_BACKOFF_BASE_MS', file: true, type: 'int', default: 1_000,
    help: 'first retry delay after a transient error (doubles, with jitter); default 1000' },
  backoff_max_ms: { key: 'backoff_max_ms', flag: 'backoff-max-ms', env: 'DOCKET_BACKOFF_MAX_MS', file: true, type: 'int', default: 60_000,
    help: 'upper bound of a retry delay; default 60000' },
  request_timeout_ms: { key: 'request_timeout_ms', flag: 'request-timeout-ms', env: 'DOCKET_REQUEST_TIMEOUT_MS', file: true, type: 'int',
    default: 30_000, min: 1, help: 'timeout of one HTTP call (a claim adds its long-poll wait); default 30000' },
  cost_review_above_cents: { key: 'cost_review_above_cents', flag: 'cost-review-above-cents', env: 'DOCKET_COST_REVIEW_ABOVE_CENTS',
    file: true, type: 'int', help: 'a run that reports a higher cost ends in the local cost-review state; default no threshold' },
  log_retention_ms: { key: 'log_retention_ms', flag: 'log-retention-ms', env: 'DOCKET_LOG_RETENTION_MS', file: true, type: 'int',
    default: 604_800_000, help: "how long an ended job's sandbox.log and state files are kept before they are removed; default 604800000 (7 days)" },
  pass_env: { key: 'pass_env', flag: 'pass-env', env: 'DOCKET_PASS_ENV', file: true, type: 'list', default: [],
    help: 'extra environment variables handed to the agent (repeatable, or comma-separated)' },
  docker_path: { key: 'docker_path', flag: 'docker-path', env: 'DOCKET_DOCKER_PATH', file: true, type: 'string', default: 'docker',
    help: 'the docker CLI; default docker' },
  docker_image: { key: 'docker_image', flag: 'docker-image', env: 'DOCKET_DOCKER_IMAGE', file: true, type: 'string', default: 'node:20',
    help: "image for docker runs that name none; it needs node and git; default node:20" },
  docker_network: { key: 'docker_network', flag: 'docker-network', env: 'DOCKET_DOCKER_NETWORK', file: true, type: 'string',
    help: 'docker --network for sandboxes (use host to reach a server on 127.0.0.1)' },
  e2b_api_key: { key: 'e2b_api_key', flag: 'e2b-api-key', env: 'DOCKET_E2B_API_KEY', file: true, type: 'string',
    help: "the E2B API key for the e2b launcher (better in the environment or config.json than as a flag); it goes to E2B only, never to Docket, a log or a sandbox" },
  e2b_template: { key: 'e2b_template', flag: 'e2b-template', env: 'DOCKET_E2B_TEMPLATE', file: true, type: 'string', default: 'base',
    help: 'E2B template for e2b runs whose launch names no image; it needs git and tar; default base' },
  e2b_api_url: { key: 'e2b_api_url', flag: 'e2b-api-url', env: 'DOCKET_E2B_API_URL', file: true, type: 'string',
    help: "E2B's API, for a self-hosted E2B; default the SDK's" },
  e2b_sandbox_url: { key: 'e2b_sandbox_url', flag: 'e2b-sandbox-url', env: 'DOCKET_E2B_SANDBOX_URL', file: true, type: 'string',
    help: "where the sandboxes' envd answers, for a self-hosted E2B; default the SDK's" },
  json: { key: 'json', flag: 'json', env: 'DOCKET_JSON', type: 'bool', default: false,
    help: 'print one JSON object per line instead of readable text' },
};

/**
 * Environment variables of the runner never handed to a sandbox, whatever --pass-env says: its own
 * (the machine token among them) and E2B's (the SDK reads its API key from E2B_API_KEY).
 */
export const NEVER_PASSED_ENV = /^(DOCKET_|E2B_)/;

/**
 * Names of a run's launch.env the runner and its daemon own, so a dispatch cannot set them: the
 * attempt's plumbing (the runner's values win) and the daemon's own limits (DOCKET_DAEMON_*). Other
 * DOCKET_* names of launch.env, such as a build's DOCKET_JOB_ID and DOCKET_USD_CAP_CENTS, reach the agent.
 */
export const RUNNER_OWNED_ENV =
  /^DOCKET_(DAEMON_.*|URL|RUN_ID|ATTEMPT|ATTEMPT_TOKEN|STATE_DIR|BRIEF_FILE|RESULT_FILE|CHECKPOINT_FILE|RESUME_FILE|SOURCE_REVISION)$/;

/**
 * The contract's runner label (`label`, `labelList` in src/protocol/common.ts), checked without
 * zod: the contract's schemas load only when an answer needs them, zod being most of an idle
 * listener's memory. runner-cli/test/config.test.mjs checks that this agrees with the contract.
 */
const LABEL = /^[A-Za-z0-9_.:/-]{1,64}$/;
const LABELS_MAX = 64;
/** The contract's machine name (RegisterBody.name): 1 to 100 characters once trimmed. */
const NAME_MAX_CHARS = 100;

/** What is wrong with a list of labels as the contract sees it, or null. */
export function labelsProblem(labels: string[]): string | null {
  const bad = labels.find((l) => !LABEL.test(l));
  if (bad !== undefined) return `${JSON.stringify(bad)} is not a label: labels are letters, digits and _ . : / -, at most 64 characters`;
  if (labels.length > LABELS_MAX) return `at most ${LABELS_MAX} labels, got ${labels.length}`;
  return null;
}

/** The bound an int option must meet, said once: "a non-negative integer", "an integer of at least 1". */
function intBound(spec: OptionSpec) {
  const min = spec.min ?? 0;
  if (spec.max !== undefined) return `an integer from ${min} to ${spec.max}`;
  return min === 0 ? 'a non-negative integer' : `an integer of at least ${min}`;
}

/**
 * @param source the option as the user gave it, for error messages: `--concurrency`, `DOCKET_CONCURRENCY`, `config.json concurrency`
 */
function coerce(spec: OptionSpec, raw: any, source: string) {
  if (raw === undefined || raw === null) return undefined;
  switch (spec.type) {
    case 'string':
      return String(raw);
    case 'bool':
      if (typeof raw === 'boolean') return raw;
      if (/^(1|true|yes|on)$/i.test(String(raw))) return true;
      if (/^(0|false|no|off|)$/i.test(String(raw))) return false;
      throw new ConfigError(`${source}: must be true or false, got ${JSON.stringify(raw)}`);
    case 'int': {
      const n = typeof raw === 'number' ? raw : Number(String(raw).trim());
      if (!Number.isSafeInteger(n) || n < (spec.min ?? 0) || (spec.max !== undefined && n > spec.max)) {
        throw new ConfigError(`${source}: must be ${intBound(spec)}, got ${JSON.stringify(raw)}`);
      }
      return n;
    }
    case 'list': {
      const items = Array.isArray(raw) ? raw.flatMap((x) => String(x).split(',')) : String(raw).split(',');
      return items.map((s) => s.trim()).filter(Boolean);
    }
  }
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Resolve the options a command uses from their sources; the others are left at their defaults,
 * unread, so a bad value of an option a command does not use never stops it. Pure: callers pass
 * what they read.
 * @param keys the command's options (default all)
 */
export function resolveConfig({ flags = {}, env = {}, file = {}, home = homedir(), host = hostname(), keys = Object.keys(OPTIONS) }: {
  flags?: Record<string, any>; env?: Record<string, string | undefined>; file?: Record<string, any>;
  home?: string; host?: string; keys?: string[];
}): Record<string, any> {
  const out: Record<string, any> = {};
  const from: Record<string, string> = {};
  /** Each option's source as the user gave it (`--label`, `DOCKET_LABELS`…), for error messages. */
  const givenAs: Record<string, string> = {};
  for (const spec of Object.values(OPTIONS)) {
    const candidates = keys.includes(spec.key) ? [
      ['flag', `--${spec.flag}`, flags[spec.key]],
      ['env', spec.env ?? '', spec.env ? env[spec.env] : undefined],
      ['file', `config.json ${spec.key}`, spec.file ? file[spec.key] : undefined],
    ] : [];
    let value;
    for (const [kind, label, raw] of candidates) {
      if (raw === undefined || raw === null || (kind === 'env' && raw === '')) continue;
      if (kind === 'flag' && Array.isArray(raw) && raw.length === 0) continue;
      value = coerce(spec, raw, label);
      from[spec.key] = kind;
      givenAs[spec.key] = label;
      break;
    }
    if (value === undefined) {
      value = structuredClone(spec.default);
      from[spec.key] = 'default';
    }
    out[spec.key] = value;
  }
  out.config_dir ??= join(home, '.config', 'docket-runner');
  out.data_dir ??= join(out.config_dir, 'data');
  out.name ??= host;
  checkValues(out, keys, (key) => givenAs[key] ?? `--${OPTIONS[key].flag}`);
  Object.defineProperty(out, 'sources', { value: from, enumerable: false });
  return out;
}

/** The checks across one option's items, and the contract's (labels, name), for the options in use. */
function checkValues(cfg: Record<string, any>, keys: string[], givenAs: (key: string) => string) {
  const fail = (key: string, problem: string) => {
    throw new ConfigError(`${givenAs(key)}: ${problem}`);
  };
  if (keys.includes('launchers')) {
    const unknown = cfg.launchers.find((l: string) => l !== 'process' && l !== 'docker' && l !== 'e2b');
    if (unknown !== undefined) fail('launchers', `unknown launcher ${JSON.stringify(unknown)}; use process, docker or e2b`);
    if (cfg.launchers.length === 0) fail('launchers', 'at least one launcher is needed');
  }
  if (keys.includes('e2b_api_key') && cfg.launchers.includes('e2b') && !cfg.e2b_api_key) {
    fail('launchers', 'the e2b launcher needs an E2B API key: set DOCKET_E2B_API_KEY (or e2b_api_key in config.json)');
  }
  if (keys.includes('server_url') && cfg.server_url && !/^https?:\/\//.test(cfg.server_url)) {
    fail('server_url', `must start with http:// or https://, got ${JSON.stringify(cfg.server_url)}`);
  }
  if (keys.includes('labels')) {
    const problem = labelsProblem(cfg.labels);
    if (problem) fail('labels', problem);
  }
  if (keys.includes('name')) {
    const length = String(cfg.name).trim().length;
    if (length < 1 || length > NAME_MAX_CHARS) fail('name', `must be 1 to ${NAME_MAX_CHARS} characters, got ${length}`);
  }
}

export function configFilePath(configDir: string) {
  return join(configDir, 'config.json');
}

/**
 * Read config.json; a missing file is an empty config.
 */
export function readConfigFile(configDir: string): Record<string, any> {
  const path = configFilePath(configDir);
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new ConfigError(`cannot read ${path}: ${(e as Error).message}`);
  }
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    const held = parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`;
    throw new ConfigError(`${path} is not a JSON object (it holds ${held})`);
  }
  return parsed;
}

/**
 * Write config.json with owner-only permissions: directory 0700, file 0600, replaced atomically.
 */
export function writeConfigFile(configDir: string, data: Record<string, any>) {
  ensurePrivateDir(configDir);
  const path = configFilePath(configDir);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(data, null, 2) + '\n', { mode: 0o600 });
  chmodSync(tmp, 0o600); // the umask may have narrowed or the file may have existed
  renameSync(tmp, path);
  return path;
}

/** mkdir -p with mode 0700, and tighten the mode if the directory existed. */
export function ensurePrivateDir(dir: string) {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * parseArgs option descriptors for the given option keys.
 */
export function parseArgsOptions(keys: string[]) {
  const opts: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const key of keys) {
    const spec = OPTIONS[key];
    opts[spec.flag] = spec.type === 'bool' ? { type: 'boolean' } : { type: 'string', ...(spec.type === 'list' ? { multiple: true } : {}) };
  }
  return opts;
}

/**
 * Map parseArgs values (keyed by flag) back to option keys.
 */
export function flagsToKeys(keys: string[], values: Record<string, any>) {
  const out: Record<string, any> = {};
  for (const key of keys) {
    const v = values[OPTIONS[key].flag];
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/**
 * Help lines for the given option keys.
 */
export function optionsHelp(keys: string[]) {
  return keys
    .map((key) => {
      const s = OPTIONS[key];
      const arg = s.type === 'bool' ? '' : s.type === 'int' ? ' <n>' : s.type === 'list' ? ' <a,b>' : ' <value>';
      const left = `  --${s.flag}${arg}`;
      const env = s.env ? ` [env ${s.env}]` : '';
      return `${left.padEnd(32)} ${s.help}${env}`;
    })
    .join('\n');
}
