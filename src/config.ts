// Every timing and limit of Docket, with its default. Each can be overridden by a Worker var of
// the same name (wrangler.toml [vars], `wrangler dev --var NAME:VALUE`, or test bindings).

export interface Config {
  /** How long a claim's lease lasts without a refresh. */
  leaseTtlMs: number;
  /** How often a runner should refresh its lease (told to the runner). */
  leaseRefreshMs: number;
  /** A claim not launched within this is requeued (or failed when the budget is spent). */
  launchDeadlineMs: number;
  /** A launched run whose lease is gone and whose daemon was silent this long is reaped. */
  daemonSilenceMs: number;
  /** Launch-failure backoff: base * 2^(attempt-1), with full jitter, capped at max. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Attempts a run gets before a launch failure fails it. */
  attemptBudget: number;
  /** Longest life of one sandbox (told to the runner). */
  sandboxLifetimeMs: number;
  /** Longest time a claim long-poll waits for work. */
  claimWaitMs: number;
  /** How often a runner should send a heartbeat (told to the runner). */
  heartbeatIntervalMs: number;
  /** Oldest runner CLI version that may register, heartbeat or claim. */
  minCliVersion: string;
  /** Launch protocols this deployment can hand out. */
  launchProtocols: string[];
  /** A gap this long between cron ticks is an outage; every run then gets one full staleness window. */
  sweepOutageThresholdMs: number;
  /** Queue heads a claim asks run objects about before it gives up for this round. */
  claimCandidatesMax: number;
  /** How long a scheduler trusts its list of label sets with queued work before reading it again. */
  labelSetsTtlMs: number;
  /** Waiting long-polls a scheduler keeps at once; more get an immediate 204. */
  claimWaitersMax: number;
  /** Page size limits for list endpoints. */
  pageSizeMax: number;
  /** Outbox publishing: attempts before an event batch waits for an operator, and backoff between. */
  outboxMaxAttempts: number;
  outboxBackoffMs: number;
  /** Longest output line kept from a daemon report, most lines, and most characters in all (an event must fit a Queue message). */
  reportLineMaxChars: number;
  reportLinesMax: number;
  reportOutputMaxChars: number;
  /** Queue consumer: delay before a message it could not handle is delivered again (doubling, capped). */
  queueRetryBaseMs: number;
  queueRetryMaxMs: number;
  /** Live event streams: open streams one run serves at once, and the longest life of one stream. */
  streamsPerRunMax: number;
  streamMaxDurationMs: number;
  /** Live event streams: a keepalive comment this often; the reconnect delay told to clients. */
  streamKeepaliveMs: number;
  streamRetryMs: number;
  /** Completion callbacks: attempts per delivery round, backoff between them (doubling, capped), and one attempt's timeout. */
  callbackMaxAttempts: number;
  callbackBackoffBaseMs: number;
  callbackBackoffMaxMs: number;
  callbackTimeoutMs: number;
  /** Builds: the least available credit a dispatch needs, and the most it reserves (build-lifecycle.md). */
  buildMinAvailableCents: number;
  buildReservationCents: number;
  /** Builds: a runner heard from within this window counts as connected for a dispatch. */
  runnerConnectedWindowMs: number;
  /** Builds: an unconfirmed dispatch not retried for this long may be released by reconciliation. */
  buildDispatchTimeoutMs: number;
  /** A run alarm that failed (an exception) is tried again after this long; it is never dropped. */
  alarmRetryMs: number;
  /** The cron backstop asks run objects unchanged for this long whether their alarm is armed. */
  alarmBackstopAgeMs: number;
  /** The most run objects the cron backstop asks per tick. */
  alarmBackstopBatch: number;
}

export const DEFAULTS: Config = {
  leaseTtlMs: 60_000,
  leaseRefreshMs: 20_000,
  launchDeadlineMs: 120_000,
  daemonSilenceMs: 600_000,
  backoffBaseMs: 5_000,
  backoffMaxMs: 300_000,
  attemptBudget: 3,
  sandboxLifetimeMs: 600_000,
  claimWaitMs: 25_000,
  heartbeatIntervalMs: 30_000,
  minCliVersion: "0.1.0",
  launchProtocols: ["process", "docker"],
  sweepOutageThresholdMs: 180_000,
  claimCandidatesMax: 8,
  labelSetsTtlMs: 5_000,
  claimWaitersMax: 1_000,
  pageSizeMax: 200,
  outboxMaxAttempts: 8,
  outboxBackoffMs: 1_000,
  reportLineMaxChars: 4_000,
  reportLinesMax: 500,
  reportOutputMaxChars: 48_000,
  queueRetryBaseMs: 5_000,
  queueRetryMaxMs: 300_000,
  streamsPerRunMax: 16,
  streamMaxDurationMs: 300_000,
  streamKeepaliveMs: 15_000,
  streamRetryMs: 2_000,
  callbackMaxAttempts: 12,
  callbackBackoffBaseMs: 1_000,
  callbackBackoffMaxMs: 3_600_000,
  callbackTimeoutMs: 10_000,
  buildMinAvailableCents: 1_000,
  buildReservationCents: 2_500,
  runnerConnectedWindowMs: 90_000,
  buildDispatchTimeoutMs: 60_000,
  alarmRetryMs: 5_000,
  alarmBackstopAgeMs: 300_000,
  alarmBackstopBatch: 50,
};

const VAR_NAMES: Record<keyof Config, string> = {
  leaseTtlMs: "LEASE_TTL_MS",
  leaseRefreshMs: "LEASE_REFRESH_MS",
  launchDeadlineMs: "LAUNCH_DEADLINE_MS",
  daemonSilenceMs: "DAEMON_SILENCE_MS",
  backoffBaseMs: "BACKOFF_BASE_MS",
  backoffMaxMs: "BACKOFF_MAX_MS",
  attemptBudget: "ATTEMPT_BUDGET",
  sandboxLifetimeMs: "SANDBOX_LIFETIME_MS",
  claimWaitMs: "CLAIM_WAIT_MS",
  heartbeatIntervalMs: "HEARTBEAT_INTERVAL_MS",
  minCliVersion: "MIN_CLI_VERSION",
  launchProtocols: "LAUNCH_PROTOCOLS",
  sweepOutageThresholdMs: "SWEEP_OUTAGE_THRESHOLD_MS",
  claimCandidatesMax: "CLAIM_CANDIDATES_MAX",
  labelSetsTtlMs: "LABEL_SETS_TTL_MS",
  claimWaitersMax: "CLAIM_WAITERS_MAX",
  pageSizeMax: "PAGE_SIZE_MAX",
  outboxMaxAttempts: "OUTBOX_MAX_ATTEMPTS",
  outboxBackoffMs: "OUTBOX_BACKOFF_MS",
  reportLineMaxChars: "REPORT_LINE_MAX_CHARS",
  reportLinesMax: "REPORT_LINES_MAX",
  reportOutputMaxChars: "REPORT_OUTPUT_MAX_CHARS",
  queueRetryBaseMs: "QUEUE_RETRY_BASE_MS",
  queueRetryMaxMs: "QUEUE_RETRY_MAX_MS",
  streamsPerRunMax: "STREAMS_PER_RUN_MAX",
  streamMaxDurationMs: "STREAM_MAX_DURATION_MS",
  streamKeepaliveMs: "STREAM_KEEPALIVE_MS",
  streamRetryMs: "STREAM_RETRY_MS",
  callbackMaxAttempts: "CALLBACK_MAX_ATTEMPTS",
  callbackBackoffBaseMs: "CALLBACK_BACKOFF_BASE_MS",
  callbackBackoffMaxMs: "CALLBACK_BACKOFF_MAX_MS",
  callbackTimeoutMs: "CALLBACK_TIMEOUT_MS",
  buildMinAvailableCents: "BUILD_MIN_AVAILABLE_CENTS",
  buildReservationCents: "BUILD_RESERVATION_CENTS",
  runnerConnectedWindowMs: "RUNNER_CONNECTED_WINDOW_MS",
  buildDispatchTimeoutMs: "BUILD_DISPATCH_TIMEOUT_MS",
  alarmRetryMs: "ALARM_RETRY_MS",
  alarmBackstopAgeMs: "ALARM_BACKSTOP_AGE_MS",
  alarmBackstopBatch: "ALARM_BACKSTOP_BATCH",
};

/** Reads the config from Worker vars; a malformed value is a deployment error and throws at once. */
export function loadConfig(vars: Record<string, unknown>): Config {
  const config = { ...DEFAULTS };
  for (const key of Object.keys(VAR_NAMES) as (keyof Config)[]) {
    const raw = vars[VAR_NAMES[key]];
    if (raw === undefined || raw === null || raw === "") continue;
    const text = String(raw);
    if (key === "minCliVersion") {
      if (!parseVersion(text)) throw new Error(`MIN_CLI_VERSION must be a version like 1.2.3, got ${text}`);
      config.minCliVersion = text;
    } else if (key === "launchProtocols") {
      config.launchProtocols = text.split(",").map((p) => p.trim()).filter(Boolean);
    } else {
      const n = Number(text);
      if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${VAR_NAMES[key]} must be a non-negative integer, got ${text}`);
      (config as Record<string, unknown>)[key] = n;
    }
  }
  if (config.attemptBudget < 1) throw new Error("ATTEMPT_BUDGET must be at least 1");
  if (config.callbackMaxAttempts < 1) throw new Error("CALLBACK_MAX_ATTEMPTS must be at least 1");
  if (config.streamsPerRunMax < 1) throw new Error("STREAMS_PER_RUN_MAX must be at least 1");
  if (config.streamKeepaliveMs < 1_000) throw new Error("STREAM_KEEPALIVE_MS must be at least 1000");
  if (config.buildReservationCents < 1) throw new Error("BUILD_RESERVATION_CENTS must be at least 1");
  return config;
}

export function parseVersion(v: string): [number, number, number] | null {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

/** True when `version` is at least `minimum`; an unparsable version is never enough. */
export function versionAtLeast(version: string, minimum: string): boolean {
  const a = parseVersion(version);
  const b = parseVersion(minimum);
  if (!a || !b) return false;
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}

/** What a runner is told at register and heartbeat. */
export function runnerConfig(config: Config) {
  return {
    lease_ttl_ms: config.leaseTtlMs,
    lease_refresh_ms: config.leaseRefreshMs,
    heartbeat_interval_ms: config.heartbeatIntervalMs,
    claim_wait_ms: config.claimWaitMs,
    sandbox_lifetime_ms: config.sandboxLifetimeMs,
    min_cli_version: config.minCliVersion,
    protocols: config.launchProtocols,
  };
}
