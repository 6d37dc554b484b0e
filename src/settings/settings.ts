// Every setting of Docket: what it means and its default (README, "Configuration"). Each can be
// overridden by a Worker var of the same name in SCREAMING_SNAKE_CASE (src/settings/vars.ts).

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
  /** Changes of state a run keeps in its record (GET /v1/runs/:id, state_history): the newest; older ones are counted. */
  runStateHistoryMax: number;
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
  /** The shortest expiry a new token may have: one that expires sooner would be dead before anyone could use it. */
  tokenTtlMinMs: number;
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
  /** Linear (autopilot): how long one GraphQL request may take, and retries of a failed one (5xx, timeout, network), the nth after n² × linearRetryBaseMs. */
  linearRequestTimeoutMs: number;
  linearRetries: number;
  linearRetryBaseMs: number;
  /** Linear: nodes per page of a connection read (Linear allows up to 250), and the most pages one read walks. */
  linearPageSize: number;
  linearPagesMax: number;
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
  /** Autopilot reconciliation: tickets one project examines per cron tick (or per operator request): each project's own share. */
  autopilotReconcileBatch: number;
  /** Autopilot reconciliation: projects one cron tick visits at most. */
  autopilotReconcileProjectsMax: number;
  /** Autopilot reconciliation: a full pass over every ready issue at least this often; passes between read only issues changed since the last pass began. */
  autopilotReconcileFullPassMs: number;
  /** Autopilot reconciliation: a full pass at least every this many passes (whichever comes first). */
  autopilotReconcileFullPassEvery: number;
  /** Autopilot reconciliation: pages of the ready list one project reads per cron tick; ready issues that need no read of their own (the queue is full) cost only their page. */
  autopilotReconcilePagesMax: number;
  /** Autopilot: reconciliation stops while an installation's remaining GitHub requests are below this (webhooks and publication go on). */
  autopilotGithubReserve: number;
  /** Autopilot: the issue facts a webhook delivery hands admission at most (bytes of JSON); a larger issue is read from GitHub instead (a queue message holds 128 KB). */
  autopilotWebhookFactsMaxBytes: number;
  /** GitHub: conditional-request validators (ETag / Last-Modified) kept per installation, and how long one is kept unused. */
  githubCacheEntriesMax: number;
  githubCacheTtlMs: number;
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
  /** The cron's delivery sweep: a pending tracker delivery or completion callback whose next try is overdue by more than deliveryStaleMs lost its queue message and is sent again, at most deliverySweepMax of each a tick. */
  deliveryStaleMs: number;
  deliverySweepMax: number;
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
  /** Dashboard: how often the live lists (queue, runs, runners) fetch their page again, in a visible tab. */
  dashboardLivePollMs: number;
  /** Dashboard: consecutive failed refreshes after which a page's live updates stop (and say so). */
  dashboardLiveFailuresMax: number;
  /** Managed runners (docs/managed-runners.md): how long a slot's runner may take no run before its pool halts it, when the pool sets no idle time. */
  managedPoolIdleMs: number;
  /** Managed runners: the longest idle time a pool may set. */
  managedPoolIdleMaxMs: number;
  /** Managed runners: a started container whose runner has not registered within this is lost: halted and replaced. */
  managedSlotRegisterTimeoutMs: number;
  /** Managed runners: how long a slot's registration token works (one registration; at least TOKEN_TTL_MIN_MS). */
  managedRegistrationTokenTtlMs: number;
  /** Managed runners: pools one organization may have, and instances (slots) all its pools may run at once. */
  managedPoolsPerOrgMax: number;
  managedInstancesPerOrgMax: number;
  /** Managed runners: pools one cron tick scales (the least recently scaled first). */
  managedPoolsPerTick: number;
  /** Managed runners: the launch protocols the managed runner's image speaks (which queued runs a pool can serve). */
  managedRunnerProtocols: string[];
  /** Managed runners: the estimated cost of one instance for an hour, in thousandths of a cent (Cloudflare's Containers pricing for the instance type). */
  managedInstanceHourMillicents: number;
  /** Managed runners: the Docket URL the runner in a container calls; its host is served by this Worker itself (durable-objects/managed-runner.ts). */
  managedRunnerDocketUrl: string;
}

export const DEFAULTS: Config = {
  leaseTtlMs: 60_000,
  leaseRefreshMs: 20_000,
  launchDeadlineMs: 120_000,
  daemonSilenceMs: 600_000,
  backoffBaseMs: 5_000,
  backoffMaxMs: 300_000,
  attemptBudget: 3,
  runStateHistoryMax: 100,
  sandboxLifetimeMs: 600_000,
  claimWaitMs: 55_000,
  heartbeatIntervalMs: 30_000,
  minCliVersion: "0.1.0",
  launchProtocols: ["process", "docker", "e2b"],
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
  tokenTtlMinMs: 60_000,
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
  linearRequestTimeoutMs: 10_000,
  linearRetries: 3,
  linearRetryBaseMs: 1_000,
  linearPageSize: 50,
  linearPagesMax: 10,
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
  autopilotReconcileFullPassMs: 3_600_000,
  autopilotReconcileFullPassEvery: 60,
  autopilotReconcilePagesMax: 10,
  autopilotGithubReserve: 500,
  autopilotWebhookFactsMaxBytes: 100_000,
  githubCacheEntriesMax: 20_000,
  githubCacheTtlMs: 604_800_000,
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
  deliveryStaleMs: 300_000,
  deliverySweepMax: 50,
  leaseWaitMaxMs: 20_000,
  leaseWaitersMax: 4,
  waitingRunnersMax: 200,
  dashboardRowsMax: 100,
  dashboardActivityEventsMax: 5_000,
  dashboardSessionIdleMs: 1_800_000,
  dashboardSessionMaxMs: 43_200_000,
  dashboardSessionTouchMs: 60_000,
  dashboardSessionsPerTokenMax: 20,
  dashboardLivePollMs: 5_000,
  dashboardLiveFailuresMax: 3,
  managedPoolIdleMs: 600_000,
  managedPoolIdleMaxMs: 86_400_000,
  managedSlotRegisterTimeoutMs: 300_000,
  managedRegistrationTokenTtlMs: 600_000,
  managedPoolsPerOrgMax: 20,
  managedInstancesPerOrgMax: 10,
  managedPoolsPerTick: 50,
  managedRunnerProtocols: ["process"],
  // A "basic" instance (1/4 vCPU, 1 GiB memory, 4 GB disk) at $0.000020 per vCPU-second, $0.0000025
  // per GiB-second of memory and $0.00000007 per GB-second of disk: about 2.8 cents an hour.
  managedInstanceHourMillicents: 2_800,
  managedRunnerDocketUrl: "http://docket.internal",
};
