// The Worker vars that override the settings (wrangler.toml [vars], `wrangler dev --var NAME:VALUE`,
// or test bindings): each setting's var name, how a var's text is read, and the checks a
// deployment's settings must pass. A malformed value is a deployment error and throws at once.

import { parseAllowHosts } from "../lib/outbound-address";
import { BOUND_CEILINGS } from "../protocol/bounds";
import { parseVersion } from "../protocol/version";
import { DEFAULTS, type Config } from "./settings";

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
  runStateHistoryMax: "RUN_STATE_HISTORY_MAX",
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
  tokenTtlMinMs: "TOKEN_TTL_MIN_MS",
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
  linearRequestTimeoutMs: "LINEAR_REQUEST_TIMEOUT_MS",
  linearRetries: "LINEAR_RETRIES",
  linearRetryBaseMs: "LINEAR_RETRY_BASE_MS",
  linearPageSize: "LINEAR_PAGE_SIZE",
  linearPagesMax: "LINEAR_PAGES_MAX",
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
  autopilotReconcileFullPassMs: "AUTOPILOT_RECONCILE_FULL_PASS_MS",
  autopilotReconcileFullPassEvery: "AUTOPILOT_RECONCILE_FULL_PASS_EVERY",
  autopilotReconcilePagesMax: "AUTOPILOT_RECONCILE_PAGES_MAX",
  autopilotGithubReserve: "AUTOPILOT_GITHUB_RESERVE",
  autopilotWebhookFactsMaxBytes: "AUTOPILOT_WEBHOOK_FACTS_MAX_BYTES",
  githubCacheEntriesMax: "GITHUB_CACHE_ENTRIES_MAX",
  githubCacheTtlMs: "GITHUB_CACHE_TTL_MS",
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
  deliveryStaleMs: "DELIVERY_STALE_MS",
  deliverySweepMax: "DELIVERY_SWEEP_MAX",
  leaseWaitMaxMs: "LEASE_WAIT_MAX_MS",
  leaseWaitersMax: "LEASE_WAITERS_MAX",
  waitingRunnersMax: "WAITING_RUNNERS_MAX",
  dashboardRowsMax: "DASHBOARD_ROWS_MAX",
  dashboardActivityEventsMax: "DASHBOARD_ACTIVITY_EVENTS_MAX",
  dashboardSessionIdleMs: "DASHBOARD_SESSION_IDLE_MS",
  dashboardSessionMaxMs: "DASHBOARD_SESSION_MAX_MS",
  dashboardSessionTouchMs: "DASHBOARD_SESSION_TOUCH_MS",
  dashboardSessionsPerTokenMax: "DASHBOARD_SESSIONS_PER_TOKEN_MAX",
  dashboardLivePollMs: "DASHBOARD_LIVE_POLL_MS",
  dashboardLiveFailuresMax: "DASHBOARD_LIVE_FAILURES_MAX",
  managedPoolIdleMs: "MANAGED_POOL_IDLE_MS",
  managedPoolIdleMaxMs: "MANAGED_POOL_IDLE_MAX_MS",
  managedSlotRegisterTimeoutMs: "MANAGED_SLOT_REGISTER_TIMEOUT_MS",
  managedRegistrationTokenTtlMs: "MANAGED_REGISTRATION_TOKEN_TTL_MS",
  managedPoolsPerOrgMax: "MANAGED_POOLS_PER_ORG_MAX",
  managedInstancesPerOrgMax: "MANAGED_INSTANCES_PER_ORG_MAX",
  managedPoolsPerTick: "MANAGED_POOLS_PER_TICK",
  managedRunnerProtocols: "MANAGED_RUNNER_PROTOCOLS",
  managedInstanceHourMillicents: "MANAGED_INSTANCE_HOUR_MILLICENTS",
  managedRunnerDocketUrl: "MANAGED_RUNNER_DOCKET_URL",
};

export function parseConfig(vars: Record<string, unknown>): Config {
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
    } else if (key === "managedRunnerDocketUrl") {
      config.managedRunnerDocketUrl = parseDocketUrl(text);
    } else if (key === "outboundAllowLoopback") {
      if (text !== "true" && text !== "false") throw new Error(`OUTBOUND_ALLOW_LOOPBACK must be true or false, got ${text}`);
      config.outboundAllowLoopback = text === "true";
    } else if (key === "outboundAllowHosts") {
      config.outboundAllowHosts = parseAllowHosts(text);
    } else if (key === "launchProtocols" || key === "managedRunnerProtocols") {
      config[key] = text.split(",").map((p) => p.trim()).filter(Boolean);
    } else {
      const n = Number(text);
      if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${VAR_NAMES[key]} must be a non-negative integer, got ${text}`);
      (config as Record<string, unknown>)[key] = n;
    }
  }
  if (config.attemptBudget < 1) throw new Error("ATTEMPT_BUDGET must be at least 1");
  if (config.runStateHistoryMax < 1) throw new Error("RUN_STATE_HISTORY_MAX must be at least 1");
  if (config.callbackMaxAttempts < 1) throw new Error("CALLBACK_MAX_ATTEMPTS must be at least 1");
  if (config.streamsPerRunMax < 1) throw new Error("STREAMS_PER_RUN_MAX must be at least 1");
  if (config.streamKeepaliveMs < 1_000) throw new Error("STREAM_KEEPALIVE_MS must be at least 1000");
  if (config.buildReservationCents < 1) throw new Error("BUILD_RESERVATION_CENTS must be at least 1");
  if (config.registrationTokenTtlMs < 1 || config.registrationTokenTtlMs > config.registrationTokenTtlMaxMs) {
    throw new Error("REGISTRATION_TOKEN_TTL_MS must be at least 1 and at most REGISTRATION_TOKEN_TTL_MAX_MS");
  }
  if (config.tokenTtlMinMs < 1 || config.tokenTtlMinMs > config.registrationTokenTtlMs) {
    throw new Error("TOKEN_TTL_MIN_MS must be at least 1 and at most REGISTRATION_TOKEN_TTL_MS");
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
  if (config.linearPageSize < 1 || config.linearPageSize > 250) throw new Error("LINEAR_PAGE_SIZE must be between 1 and 250");
  if (config.githubPagesMax < 1) throw new Error("GITHUB_PAGES_MAX must be at least 1");
  if (config.autopilotReconcileFullPassEvery < 1) throw new Error("AUTOPILOT_RECONCILE_FULL_PASS_EVERY must be at least 1");
  if (config.autopilotReconcilePagesMax < 1) throw new Error("AUTOPILOT_RECONCILE_PAGES_MAX must be at least 1");
  if (config.trackerDeliveryMaxAttempts < 1) throw new Error("TRACKER_DELIVERY_MAX_ATTEMPTS must be at least 1");
  if (config.deliverySweepMax < 1) throw new Error("DELIVERY_SWEEP_MAX must be at least 1");
  if (config.publicationTriesMax < 1) throw new Error("PUBLICATION_TRIES_MAX must be at least 1");
  checkDashboard(config);
  checkManagedRunners(config);
  return config;
}

/** A session must be able to slide (it records a page view more often than it would idle out); a live list polls at most once a second. */
function checkDashboard(config: Config): void {
  if (config.dashboardSessionIdleMs < 1 || config.dashboardSessionMaxMs < 1) throw new Error("DASHBOARD_SESSION_IDLE_MS and DASHBOARD_SESSION_MAX_MS must be at least 1");
  if (config.dashboardSessionTouchMs >= config.dashboardSessionIdleMs) throw new Error("DASHBOARD_SESSION_TOUCH_MS must be less than DASHBOARD_SESSION_IDLE_MS");
  if (config.dashboardSessionsPerTokenMax < 1) throw new Error("DASHBOARD_SESSIONS_PER_TOKEN_MAX must be at least 1");
  if (config.dashboardLivePollMs < 1_000) throw new Error("DASHBOARD_LIVE_POLL_MS must be at least 1000");
  if (config.dashboardLiveFailuresMax < 1) throw new Error("DASHBOARD_LIVE_FAILURES_MAX must be at least 1");
}

/** A managed slot's token must outlive the wait for its registration, and a pool's idle time must be settable. */
function checkManagedRunners(config: Config): void {
  if (config.managedRegistrationTokenTtlMs < config.tokenTtlMinMs || config.managedRegistrationTokenTtlMs > config.registrationTokenTtlMaxMs) {
    throw new Error("MANAGED_REGISTRATION_TOKEN_TTL_MS must be at least TOKEN_TTL_MIN_MS and at most REGISTRATION_TOKEN_TTL_MAX_MS");
  }
  if (config.managedSlotRegisterTimeoutMs < 1) throw new Error("MANAGED_SLOT_REGISTER_TIMEOUT_MS must be at least 1");
  if (config.managedPoolIdleMs < 1 || config.managedPoolIdleMs > config.managedPoolIdleMaxMs) throw new Error("MANAGED_POOL_IDLE_MS must be at least 1 and at most MANAGED_POOL_IDLE_MAX_MS");
  if (config.managedPoolsPerTick < 1) throw new Error("MANAGED_POOLS_PER_TICK must be at least 1");
  if (config.managedRunnerProtocols.length === 0) throw new Error("MANAGED_RUNNER_PROTOCOLS must name at least one launch protocol");
}

/** The URL a managed runner calls: http(s), with a host the container's HTTP is intercepted for. */
function parseDocketUrl(text: string): string {
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw new Error(`MANAGED_RUNNER_DOCKET_URL must be an http(s) URL, got ${text}`);
  return text;
}
