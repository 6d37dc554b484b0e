// Every timing and limit of Docket, with its default. Each can be overridden by a Worker var of
// the same name (wrangler.toml [vars], `wrangler dev --var NAME:VALUE`, or test bindings).

import { parseAllowHosts } from "./lib/outbound-address";
import { BOUND_CEILINGS } from "./protocol/bounds";
import { parseVersion } from "./protocol/version";

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
  /** How this deployment's operators get a current runner: sent with every 426 as `upgrade`. */
  runnerUpgradeHint: string;
  /** A gap this long between cron ticks is an outage; every run then gets one full staleness window. */
  sweepOutageThresholdMs: number;
  /** Queue heads a claim asks run objects about before it gives up for this round. */
  claimCandidatesMax: number;
  /** How long a scheduler trusts its list of label sets with queued work before reading it again. */
  labelSetsTtlMs: number;
  /**
   * How long a scheduler trusts the sweep row it read for its claims (whether a recovery holds
   * dispatch) before reading it again; a row that would hold a claim is always read again.
   */
  claimSweepTtlMs: number;
  /** Machine tokens an isolate, and each organization's scheduler, keeps verified for claims (the oldest go first). */
  claimTokensKnownMax: number;
  /**
   * Queue heads a scheduler's head read takes beyond what its claims can use (spread over the label
   * sets it reads), kept for the claims that follow; 0 reads only what the claims can use.
   */
  claimReadAhead: number;
  /** How long those heads serve later claims, when no new work arrived meanwhile (which drops them at once). */
  claimReadAheadTtlMs: number;
  /** Waiting long-polls a scheduler keeps at once; more get 429 too_many_waiters. */
  claimWaitersMax: number;
  /** Page size limits for list endpoints. */
  pageSizeMax: number;
  /**
   * Whether each answer is checked against the OpenAPI document (src/openapi/operation.ts): "off",
   * "log" (a contract.violation line) or "enforce" (the answer becomes a 500 naming the difference;
   * the test suites run so).
   */
  contractCheck: "off" | "log" | "enforce";
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
  /**
   * Requests to URLs tenants give (callback_url, an autopilot project's github.api_url,
   * src/lib/outbound-address.ts): whether loopback hosts are allowed (a local run), and hosts allowed
   * whatever they are (names, addresses, `*.suffix`).
   */
  outboundAllowLoopback: boolean;
  outboundAllowHosts: string[];
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
  /** Registration tokens: how long one works when its creator names no expiry, and the longest expiry allowed. */
  registrationTokenTtlMs: number;
  registrationTokenTtlMaxMs: number;
  /** After a callback secret rotation, how long callbacks are signed with the old secret too. */
  callbackSecretOverlapMs: number;
  /** Request bodies: the most bytes of any JSON body, and of a daemon report (which carries the patch); more is 413 before parsing. */
  requestBodyMaxBytes: number;
  reportBodyMaxBytes: number;
  /** Dispatch bounds (runs and projects): brief characters, labels, launch env keys and characters in names and values, metadata keys. */
  briefMaxChars: number;
  labelsMax: number;
  launchEnvMaxKeys: number;
  launchEnvMaxChars: number;
  metadataMaxKeys: number;
  /** The longest patch a final report may carry, in characters. */
  artifactPatchMaxChars: number;
  /** A checkpoint's patch and its session (as JSON text): most characters each (docs/protocol.md, "Pause and resume"). */
  checkpointPatchMaxChars: number;
  checkpointSessionMaxChars: number;
  /** A claim refused because the scheduler holds CLAIM_WAITERS_MAX long-polls is told to retry after this. */
  claimWaitersRetryAfterMs: number;
  /** The Retry-After of a 429 rate_limited: the period of the rate limit bindings in wrangler.toml. */
  rateLimitRetryAfterMs: number;
  /** Claims: label sets with queued work whose queue heads one claim reads (a rotating window when a runner covers more). */
  claimLabelSetsMax: number;
  /** Claims: label sets with queued work a scheduler reads from D1 at once, oldest first. */
  labelSetsReadMax: number;
  /** Dispatch: how long an Idempotency-Key replays its run; after it the same key creates a new run. */
  idempotencyKeyTtlMs: number;
  /** Events: how long after a run ended its events stay readable (outbox, events page, stream, D1 `events`). */
  eventRetentionMs: number;
  /** Storage pruning: rows one pruning step deletes (per table per cron tick; per run object alarm). */
  pruneBatchMax: number;
  /** Storage pruning: ended runs whose run object one cron tick asks to prune its events (a Durable Object request each). */
  pruneRunObjectsMax: number;
  /** A run alarm that failed (an exception) is tried again after this long; it is never dropped. */
  alarmRetryMs: number;
  /** The cron backstop asks run objects unchanged for this long whether their alarm is armed. */
  alarmBackstopAgeMs: number;
  /** The most run objects the cron backstop asks per tick. */
  alarmBackstopBatch: number;
  /** GitHub (autopilot): how long one request to GitHub may take before it counts as failed. */
  githubRequestTimeoutMs: number;
  /** GitHub: retries of a failed request (5xx, timeout, network), the nth after n² × githubRetryBaseMs; also the most rate-limit waits. */
  githubRetries: number;
  githubRetryBaseMs: number;
  /** GitHub: the longest rate-limit wait (from GitHub's headers) worth waiting out; a longer one fails the call at once. */
  githubRateLimitWaitMaxMs: number;
  /** GitHub: items per page of a list read (GitHub allows up to 100), and the most pages one read walks. */
  githubPageSize: number;
  githubPagesMax: number;
  /** GitHub: installation tokens kept for reuse across providers in one isolate (one per App installation); 0 keeps each provider's own. */
  githubTokenCacheMax: number;
  /** GitHub: redirects one request follows (a renamed repository), each to a host the outbound policy allows. */
  githubRedirectsMax: number;
  /** Autopilot: the largest queue capacity (admitted waiting runs) a project may configure. */
  autopilotQueueCapacityMax: number;
  /** Publication: tries of the pull-request step before the run ends failed (publish_failed), and the wait between tries. */
  publicationTriesMax: number;
  publicationRetryMs: number;
  /** Publication recovery: pending publications the cron tick reconciles per tick, before anything is dispatched. */
  publicationRecoveryBatch: number;
  /** Recovery after an outage or a deploy (src/recovery.ts): runs one step of its pass reconciles, the longest it holds dispatch, and the Retry-After of a held claim. */
  recoveryBatch: number;
  recoveryHoldMaxMs: number;
  recoveryRetryAfterMs: number;
  /** Recovery: failed tries of one run before the pass records its problem on it and moves on (it never pins the pass). */
  recoveryRunTriesMax: number;
  /** Autopilot: how long a ticket remembers a webhook delivery id (a redelivery within it admits nothing new), and the most it keeps. */
  autopilotDeliveryTtlMs: number;
  autopilotDeliveriesMax: number;
  /** Autopilot: admissions, refusals and lapses one ticket keeps in its history (oldest dropped first). */
  autopilotHistoryMax: number;
  /** Autopilot reconciliation: tickets examined per cron tick (or per operator request), across projects. */
  autopilotReconcileBatch: number;
  /** Autopilot reconciliation: projects one cron tick visits at most. */
  autopilotReconcileProjectsMax: number;
  /** Autopilot: a lapsed ticket's failed withdrawal of its queued run is retried from the ticket's alarm, after base * 2^(n-1), at most this many times. */
  autopilotWithdrawRetryMs: number;
  autopilotWithdrawAttemptsMax: number;
  /** Autopilot scheduler: runs of one project holding a slot at once when its scheduler sets no concurrency, and the most it may set. */
  autopilotSchedulerConcurrencyDefault: number;
  autopilotSchedulerConcurrencyMax: number;
  /** Autopilot scheduler backstop: how often slot holders are checked against their run objects, and how many per check. */
  autopilotSchedulerSlotCheckMs: number;
  autopilotSchedulerSlotCheckMax: number;
  /** Autopilot scheduler: paused runs one enable re-queues (oldest first; enable again for the rest). */
  autopilotSchedulerResumeMax: number;
  /** Autopilot scheduler: closed projects one queue-head read leaves out in D1; runs of more closed projects are left out in the scheduler. */
  autopilotSchedulerClosedProjectsMax: number;
  /** Blockers: the longest text of a blocker's summary, human action and each evidence item or question, and the most items of each list. */
  blockerTextMaxChars: number;
  blockerItemsMax: number;
  /** Tracker deliveries (blocker comment, review label, PR comment): tries before a delivery is failed, and the backoff between them (doubling, capped). */
  trackerDeliveryMaxAttempts: number;
  trackerDeliveryBackoffBaseMs: number;
  trackerDeliveryBackoffMaxMs: number;
  /** Longest time a lease (or launched) call with wait_ms waits for a stop request; never more than half of leaseTtlMs. */
  leaseWaitMaxMs: number;
  /** Waiting lease calls one run object holds at once; more answer at once, without waiting. */
  leaseWaitersMax: number;
  /** Why a run waits (src/run/waiting.ts): connected runners one explanation compares the run with. */
  waitingRunnersMax: number;
  /** Dashboard (/dash): rows one page lists at most (queue, runners, tokens, events). */
  dashboardRowsMax: number;
  /** Dashboard: run events the last day's activity charts read at most (newest first). */
  dashboardActivityEventsMax: number;
  /** Dashboard: a session with no page view for this long has ended. */
  dashboardSessionIdleMs: number;
  /** Dashboard: a session ends this long after sign-in, however busy. */
  dashboardSessionMaxMs: number;
  /** Dashboard: a page view records itself on its session (D1 write) only when the last record is older than this. */
  dashboardSessionTouchMs: number;
  /** Dashboard: sessions one member token holds at once; a sign-in past it ends the least recently seen. */
  dashboardSessionsPerTokenMax: number;
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
  claimWaitMs: 55_000,
  heartbeatIntervalMs: 30_000,
  minCliVersion: "0.1.0",
  launchProtocols: ["process", "docker"],
  runnerUpgradeHint:
    "install the current runner tarball this deployment's operators publish: `npm install -g ./docket-runner-<version>.tgz` (runner-cli/README.md, \"Install\")",
  sweepOutageThresholdMs: 180_000,
  claimCandidatesMax: 8,
  labelSetsTtlMs: 5_000,
  claimSweepTtlMs: 1_000,
  claimTokensKnownMax: 10_000,
  claimReadAhead: 4,
  claimReadAheadTtlMs: 2_000,
  claimWaitersMax: 1_000,
  pageSizeMax: 200,
  contractCheck: "off",
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
  outboundAllowLoopback: false,
  outboundAllowHosts: [],
  callbackMaxAttempts: 12,
  callbackBackoffBaseMs: 1_000,
  callbackBackoffMaxMs: 3_600_000,
  callbackTimeoutMs: 10_000,
  buildMinAvailableCents: 1_000,
  buildReservationCents: 2_500,
  runnerConnectedWindowMs: 90_000,
  buildDispatchTimeoutMs: 60_000,
  registrationTokenTtlMs: 604_800_000,
  registrationTokenTtlMaxMs: 2_592_000_000,
  callbackSecretOverlapMs: 86_400_000,
  requestBodyMaxBytes: 1_048_576,
  reportBodyMaxBytes: 8_388_608,
  briefMaxChars: 20_000,
  labelsMax: 32,
  launchEnvMaxKeys: 128,
  launchEnvMaxChars: 65_536,
  metadataMaxKeys: 64,
  artifactPatchMaxChars: 5_000_000,
  checkpointPatchMaxChars: 5_000_000,
  checkpointSessionMaxChars: 1_000_000,
  claimWaitersRetryAfterMs: 5_000,
  rateLimitRetryAfterMs: 10_000,
  claimLabelSetsMax: 32,
  labelSetsReadMax: 1_000,
  idempotencyKeyTtlMs: 86_400_000,
  eventRetentionMs: 604_800_000,
  pruneBatchMax: 1_000,
  pruneRunObjectsMax: 50,
  alarmRetryMs: 5_000,
  alarmBackstopAgeMs: 300_000,
  alarmBackstopBatch: 50,
  githubRequestTimeoutMs: 10_000,
  githubRetries: 3,
  githubRetryBaseMs: 1_000,
  githubRateLimitWaitMaxMs: 60_000,
  githubPageSize: 100,
  githubPagesMax: 10,
  githubTokenCacheMax: 100,
  githubRedirectsMax: 3,
  autopilotQueueCapacityMax: 100,
  publicationTriesMax: 5,
  publicationRetryMs: 30_000,
  publicationRecoveryBatch: 50,
  recoveryBatch: 100,
  recoveryHoldMaxMs: 300_000,
  recoveryRetryAfterMs: 5_000,
  recoveryRunTriesMax: 3,
  autopilotDeliveryTtlMs: 604_800_000,
  autopilotDeliveriesMax: 500,
  autopilotHistoryMax: 100,
  autopilotReconcileBatch: 50,
  autopilotReconcileProjectsMax: 10,
  autopilotWithdrawRetryMs: 30_000,
  autopilotWithdrawAttemptsMax: 5,
  autopilotSchedulerConcurrencyDefault: 10,
  autopilotSchedulerConcurrencyMax: 100,
  autopilotSchedulerSlotCheckMs: 60_000,
  autopilotSchedulerSlotCheckMax: 20,
  autopilotSchedulerResumeMax: 100,
  autopilotSchedulerClosedProjectsMax: 20,
  blockerTextMaxChars: 4_000,
  blockerItemsMax: 20,
  trackerDeliveryMaxAttempts: 8,
  trackerDeliveryBackoffBaseMs: 5_000,
  trackerDeliveryBackoffMaxMs: 600_000,
  leaseWaitMaxMs: 20_000,
  leaseWaitersMax: 4,
  waitingRunnersMax: 200,
  dashboardRowsMax: 100,
  dashboardActivityEventsMax: 5_000,
  dashboardSessionIdleMs: 1_800_000,
  dashboardSessionMaxMs: 43_200_000,
  dashboardSessionTouchMs: 60_000,
  dashboardSessionsPerTokenMax: 20,
};

// The schemas' hard ceilings (src/protocol/bounds.ts) are configurable bounds of this Config.
BOUND_CEILINGS satisfies Partial<Record<keyof Config, number>>;

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
  runnerUpgradeHint: "RUNNER_UPGRADE_HINT",
  sweepOutageThresholdMs: "SWEEP_OUTAGE_THRESHOLD_MS",
  claimCandidatesMax: "CLAIM_CANDIDATES_MAX",
  labelSetsTtlMs: "LABEL_SETS_TTL_MS",
  claimSweepTtlMs: "CLAIM_SWEEP_TTL_MS",
  claimTokensKnownMax: "CLAIM_TOKENS_KNOWN_MAX",
  claimReadAhead: "CLAIM_READ_AHEAD",
  claimReadAheadTtlMs: "CLAIM_READ_AHEAD_TTL_MS",
  claimWaitersMax: "CLAIM_WAITERS_MAX",
  pageSizeMax: "PAGE_SIZE_MAX",
  contractCheck: "CONTRACT_CHECK",
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
  outboundAllowLoopback: "OUTBOUND_ALLOW_LOOPBACK",
  outboundAllowHosts: "OUTBOUND_ALLOW_HOSTS",
  callbackMaxAttempts: "CALLBACK_MAX_ATTEMPTS",
  callbackBackoffBaseMs: "CALLBACK_BACKOFF_BASE_MS",
  callbackBackoffMaxMs: "CALLBACK_BACKOFF_MAX_MS",
  callbackTimeoutMs: "CALLBACK_TIMEOUT_MS",
  buildMinAvailableCents: "BUILD_MIN_AVAILABLE_CENTS",
  buildReservationCents: "BUILD_RESERVATION_CENTS",
  runnerConnectedWindowMs: "RUNNER_CONNECTED_WINDOW_MS",
  buildDispatchTimeoutMs: "BUILD_DISPATCH_TIMEOUT_MS",
  registrationTokenTtlMs: "REGISTRATION_TOKEN_TTL_MS",
  registrationTokenTtlMaxMs: "REGISTRATION_TOKEN_TTL_MAX_MS",
  callbackSecretOverlapMs: "CALLBACK_SECRET_OVERLAP_MS",
  requestBodyMaxBytes: "REQUEST_BODY_MAX_BYTES",
  reportBodyMaxBytes: "REPORT_BODY_MAX_BYTES",
  briefMaxChars: "BRIEF_MAX_CHARS",
  labelsMax: "LABELS_MAX",
  launchEnvMaxKeys: "LAUNCH_ENV_MAX_KEYS",
  launchEnvMaxChars: "LAUNCH_ENV_MAX_CHARS",
  metadataMaxKeys: "METADATA_MAX_KEYS",
  artifactPatchMaxChars: "ARTIFACT_PATCH_MAX_CHARS",
  checkpointPatchMaxChars: "CHECKPOINT_PATCH_MAX_CHARS",
  checkpointSessionMaxChars: "CHECKPOINT_SESSION_MAX_CHARS",
  claimWaitersRetryAfterMs: "CLAIM_WAITERS_RETRY_AFTER_MS",
  rateLimitRetryAfterMs: "RATE_LIMIT_RETRY_AFTER_MS",
  claimLabelSetsMax: "CLAIM_LABEL_SETS_MAX",
  labelSetsReadMax: "LABEL_SETS_READ_MAX",
  idempotencyKeyTtlMs: "IDEMPOTENCY_KEY_TTL_MS",
  eventRetentionMs: "EVENT_RETENTION_MS",
  pruneBatchMax: "PRUNE_BATCH_MAX",
  pruneRunObjectsMax: "PRUNE_RUN_OBJECTS_MAX",
  alarmRetryMs: "ALARM_RETRY_MS",
  alarmBackstopAgeMs: "ALARM_BACKSTOP_AGE_MS",
  alarmBackstopBatch: "ALARM_BACKSTOP_BATCH",
  githubRequestTimeoutMs: "GITHUB_REQUEST_TIMEOUT_MS",
  githubRetries: "GITHUB_RETRIES",
  githubRetryBaseMs: "GITHUB_RETRY_BASE_MS",
  githubRateLimitWaitMaxMs: "GITHUB_RATE_LIMIT_WAIT_MAX_MS",
  githubPageSize: "GITHUB_PAGE_SIZE",
  githubPagesMax: "GITHUB_PAGES_MAX",
  githubTokenCacheMax: "GITHUB_TOKEN_CACHE_MAX",
  githubRedirectsMax: "GITHUB_REDIRECTS_MAX",
  autopilotQueueCapacityMax: "AUTOPILOT_QUEUE_CAPACITY_MAX",
  publicationTriesMax: "PUBLICATION_TRIES_MAX",
  publicationRetryMs: "PUBLICATION_RETRY_MS",
  publicationRecoveryBatch: "PUBLICATION_RECOVERY_BATCH",
  recoveryBatch: "RECOVERY_BATCH",
  recoveryHoldMaxMs: "RECOVERY_HOLD_MAX_MS",
  recoveryRetryAfterMs: "RECOVERY_RETRY_AFTER_MS",
  recoveryRunTriesMax: "RECOVERY_RUN_TRIES_MAX",
  autopilotDeliveryTtlMs: "AUTOPILOT_DELIVERY_TTL_MS",
  autopilotDeliveriesMax: "AUTOPILOT_DELIVERIES_MAX",
  autopilotHistoryMax: "AUTOPILOT_HISTORY_MAX",
  autopilotReconcileBatch: "AUTOPILOT_RECONCILE_BATCH",
  autopilotReconcileProjectsMax: "AUTOPILOT_RECONCILE_PROJECTS_MAX",
  autopilotWithdrawRetryMs: "AUTOPILOT_WITHDRAW_RETRY_MS",
  autopilotWithdrawAttemptsMax: "AUTOPILOT_WITHDRAW_ATTEMPTS_MAX",
  autopilotSchedulerConcurrencyDefault: "AUTOPILOT_SCHEDULER_CONCURRENCY_DEFAULT",
  autopilotSchedulerConcurrencyMax: "AUTOPILOT_SCHEDULER_CONCURRENCY_MAX",
  autopilotSchedulerSlotCheckMs: "AUTOPILOT_SCHEDULER_SLOT_CHECK_MS",
  autopilotSchedulerSlotCheckMax: "AUTOPILOT_SCHEDULER_SLOT_CHECK_MAX",
  autopilotSchedulerResumeMax: "AUTOPILOT_SCHEDULER_RESUME_MAX",
  autopilotSchedulerClosedProjectsMax: "AUTOPILOT_SCHEDULER_CLOSED_PROJECTS_MAX",
  blockerTextMaxChars: "BLOCKER_TEXT_MAX_CHARS",
  blockerItemsMax: "BLOCKER_ITEMS_MAX",
  trackerDeliveryMaxAttempts: "TRACKER_DELIVERY_MAX_ATTEMPTS",
  trackerDeliveryBackoffBaseMs: "TRACKER_DELIVERY_BACKOFF_BASE_MS",
  trackerDeliveryBackoffMaxMs: "TRACKER_DELIVERY_BACKOFF_MAX_MS",
  leaseWaitMaxMs: "LEASE_WAIT_MAX_MS",
  leaseWaitersMax: "LEASE_WAITERS_MAX",
  waitingRunnersMax: "WAITING_RUNNERS_MAX",
  dashboardRowsMax: "DASHBOARD_ROWS_MAX",
  dashboardActivityEventsMax: "DASHBOARD_ACTIVITY_EVENTS_MAX",
  dashboardSessionIdleMs: "DASHBOARD_SESSION_IDLE_MS",
  dashboardSessionMaxMs: "DASHBOARD_SESSION_MAX_MS",
  dashboardSessionTouchMs: "DASHBOARD_SESSION_TOUCH_MS",
  dashboardSessionsPerTokenMax: "DASHBOARD_SESSIONS_PER_TOKEN_MAX",
};

/** Parsed once per environment object: every request and every object an isolate starts shares it. */
const parsed = new WeakMap<object, Config>();

/** Reads the config from Worker vars; a malformed value is a deployment error and throws at once. */
export function loadConfig(vars: Record<string, unknown>): Config {
  let config = parsed.get(vars);
  if (!config) {
    config = Object.freeze(parseConfig(vars));
    parsed.set(vars, config);
  }
  return config;
}

function parseConfig(vars: Record<string, unknown>): Config {
  const config = { ...DEFAULTS };
  for (const key of Object.keys(VAR_NAMES) as (keyof Config)[]) {
    const raw = vars[VAR_NAMES[key]];
    if (raw === undefined || raw === null || raw === "") continue;
    const text = String(raw);
    if (key === "minCliVersion") {
      if (!parseVersion(text)) throw new Error(`MIN_CLI_VERSION must be a version like 1.2.3, got ${text}`);
      config.minCliVersion = text;
    } else if (key === "contractCheck") {
      if (text !== "off" && text !== "log" && text !== "enforce") throw new Error(`CONTRACT_CHECK must be off, log or enforce, got ${text}`);
      config.contractCheck = text;
    } else if (key === "runnerUpgradeHint") {
      config.runnerUpgradeHint = text;
    } else if (key === "outboundAllowLoopback") {
      if (text !== "true" && text !== "false") throw new Error(`OUTBOUND_ALLOW_LOOPBACK must be true or false, got ${text}`);
      config.outboundAllowLoopback = text === "true";
    } else if (key === "outboundAllowHosts") {
      config.outboundAllowHosts = parseAllowHosts(text);
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
  if (config.registrationTokenTtlMs < 1 || config.registrationTokenTtlMs > config.registrationTokenTtlMaxMs) {
    throw new Error("REGISTRATION_TOKEN_TTL_MS must be at least 1 and at most REGISTRATION_TOKEN_TTL_MAX_MS");
  }
  for (const [key, ceiling] of Object.entries(BOUND_CEILINGS) as [keyof typeof BOUND_CEILINGS, number][]) {
    if (config[key] > ceiling) throw new Error(`${VAR_NAMES[key]} must be at most ${ceiling}, got ${config[key]}`);
  }
  if (config.claimReadAhead > 100) throw new Error("CLAIM_READ_AHEAD must be at most 100");
  if (config.autopilotSchedulerClosedProjectsMax > 1_000) throw new Error("AUTOPILOT_SCHEDULER_CLOSED_PROJECTS_MAX must be at most 1000");
  if (config.claimLabelSetsMax < 1) throw new Error("CLAIM_LABEL_SETS_MAX must be at least 1");
  if (config.labelSetsReadMax < 1) throw new Error("LABEL_SETS_READ_MAX must be at least 1");
  if (config.claimTokensKnownMax < 1) throw new Error("CLAIM_TOKENS_KNOWN_MAX must be at least 1");
  if (config.pruneBatchMax < 1) throw new Error("PRUNE_BATCH_MAX must be at least 1");
  if (config.githubRequestTimeoutMs < 1) throw new Error("GITHUB_REQUEST_TIMEOUT_MS must be at least 1");
  if (config.githubPageSize < 1 || config.githubPageSize > 100) throw new Error("GITHUB_PAGE_SIZE must be between 1 and 100");
  if (config.githubPagesMax < 1) throw new Error("GITHUB_PAGES_MAX must be at least 1");
  if (config.trackerDeliveryMaxAttempts < 1) throw new Error("TRACKER_DELIVERY_MAX_ATTEMPTS must be at least 1");
  if (config.publicationTriesMax < 1) throw new Error("PUBLICATION_TRIES_MAX must be at least 1");
  checkDashboardSessions(config);
  return config;
}

/** A session must be able to slide: it records a page view more often than it would idle out. */
function checkDashboardSessions(config: Config): void {
  if (config.dashboardSessionIdleMs < 1 || config.dashboardSessionMaxMs < 1) throw new Error("DASHBOARD_SESSION_IDLE_MS and DASHBOARD_SESSION_MAX_MS must be at least 1");
  if (config.dashboardSessionTouchMs >= config.dashboardSessionIdleMs) throw new Error("DASHBOARD_SESSION_TOUCH_MS must be less than DASHBOARD_SESSION_IDLE_MS");
  if (config.dashboardSessionsPerTokenMax < 1) throw new Error("DASHBOARD_SESSIONS_PER_TOKEN_MAX must be at least 1");
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
