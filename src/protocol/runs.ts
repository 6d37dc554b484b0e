// Runs and their events: what a member dispatches, lists, reads and cancels (docs/protocol.md,
// "Runs (member token)", "Events" and "Live events").

import { z } from "zod";
import { BOUND_CEILINGS } from "./bounds.js";
import { epochMs, keysetCursor, label, labelList, machineId, orgId, page, pageQuery, prefixedId, runId, seqCursor } from "./common.js";

/** The run states (../shared/DESIGN.md, "The run state machine"); src/run/states.ts holds the transitions. */
export const RUN_STATES = [
  "queued",
  "claimed",
  "implementing",
  "pausing",
  "paused",
  "blocked",
  "publishing",
  "completed",
  "failed",
  "cancelled",
] as const;

export const RunState = z.enum(RUN_STATES).meta({ id: "RunState" });

/** A string record with at most `max` keys (the hard ceiling; the configured bound is checked by the Worker). */
const atMostKeys = (max: number) => (record: Record<string, unknown>) => Object.keys(record).length <= max;

/** An environment variable's name in a launch. */
export const envVarName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/);

/**
 * A launch as callers give it (a run's, a build project's): the protocol, the command, the image and
 * the environment, whose names follow `envName` (a build project reserves some).
 */
export function launchInput(envName: z.ZodType<string> = envVarName) {
  return z
    .object({
      protocol: z.string().min(1).max(32).optional(),
      command: z.array(z.string().min(1).max(4_000)).min(1).max(64),
      image: z.string().min(1).max(500).nullable().optional(),
      env: z
        .record(envName, z.string().max(10_000))
        .refine(atMostKeys(BOUND_CEILINGS.launchEnvMaxKeys), "too many keys")
        .optional(),
    })
    .strict();
}

export const CreateRunBody = z
  .object({
    brief: z.string().min(1).max(BOUND_CEILINGS.briefMaxChars),
    repository: z
      .object({
        url: z.string().min(1).max(2_000),
        commit: z.string().regex(/^[0-9a-f]{7,64}$/, "must be a commit hash").nullable().optional(),
      })
      .strict()
      .nullable()
      .optional(),
    labels: labelList.optional(),
    priority: z.number().int().min(0).max(1_000).optional(),
    launch: launchInput(),
    callback_url: z
      .url({ protocol: /^https?$/ })
      .max(2_000)
      .nullable()
      .optional()
      .describe("where the completion callback goes (docs/callbacks.md): a public host; loopback, private, link-local, unique-local, internal and bare-IP hosts are refused unless the deployment allows them (OUTBOUND_ALLOW_HOSTS, OUTBOUND_ALLOW_LOOPBACK)"),
    metadata: z
      .record(z.string().min(1).max(64), z.string().max(1_000))
      .refine(atMostKeys(BOUND_CEILINGS.metadataMaxKeys), "too many keys")
      .optional(),
  })
  .strict();
export type CreateRunBody = z.infer<typeof CreateRunBody>;

/** The runs list's filters (docs/protocol.md, "Runs"); given together, a run meets them all. */
export const ListRunsQuery = z
  .object({
    state: RunState.optional(),
    // An autopilot project's id (src/protocol/autopilot.ts imports this module, so it is spelled here).
    project_id: prefixedId("apj", "an autopilot project").optional().describe("runs the autopilot project admitted"),
    label: label.optional().describe("runs that require this runner label, matched exactly as one of the labels in labels_key"),
    machine_id: machineId.optional().describe("runs this machine claimed in any attempt"),
    ...pageQuery(keysetCursor("run_[0-9a-f]{24}")),
  })
  .strict();

export const RunPath = z.object({ id: runId });

export const CancelRunBody = z.object({ reason: z.string().max(1_000).optional() }).strict();

export const PauseRunBody = z.object({ reason: z.string().max(1_000).optional() }).strict();
export const ResumeRunBody = z.object({}).strict();

/** An events page's cursor is a sequence number, the same as the live stream's ?after= and Last-Event-ID. */
export const ListRunEventsQuery = z
  .object({
    ...pageQuery(seqCursor, 1_000),
    order: z
      .enum(["oldest", "newest"])
      .optional()
      .describe("oldest (default): oldest first, after `cursor`; newest: newest first, before `cursor` (default: from the newest), each page's next_cursor its oldest event's seq"),
  })
  .strict();

/** A sequence number as text: the stream's ?after= and its Last-Event-ID header. */
export const seqText = z.string().regex(/^\d{1,15}$/, "must be a sequence number (a non-negative integer)");

export const StreamRunEventsQuery = z
  .object({ after: seqText.describe("start after this sequence number (default 0); a Last-Event-ID header wins over it").optional() })
  .strict();

// ---- answers -------------------------------------------------------------------------------------

/** The completion callback's delivery (docs/callbacks.md); `waiting` until the run has ended and its end event was consumed. */
export const CallbackDelivery = z.object({
  url: z.string(),
  status: z.enum(["waiting", "pending", "delivered", "failed"]),
  attempts: z.number().int().describe("attempts made in the current round"),
  max_attempts: z.number().int().describe("CALLBACK_MAX_ATTEMPTS"),
  last_error: z.string().nullable(),
  last_status_code: z.number().int().nullable().describe("the last answer's HTTP status"),
  last_attempt_at_ms: epochMs.nullable(),
  delivered_at_ms: epochMs.nullable(),
  created_at_ms: epochMs.nullable().describe("when the delivery was first recorded; null before the run ended"),
}).meta({ id: "CallbackDelivery" });

export const RunStep = z.object({
  attempt: z.number().int(),
  machine_id: machineId,
  claimed_at_ms: epochMs,
  launched_at_ms: epochMs.nullable(),
  sandbox_id: z.string().nullable(),
  ended_at_ms: epochMs.nullable(),
  outcome: z.string().nullable().describe("how the attempt ended: requeued, completed, failed, cancelled, …"),
  error: z.string().nullable(),
}).meta({ id: "RunStep" });

export const RunArtifact = z.object({
  patch: z.string().describe("the patch, a unified diff"),
  empty: z.boolean().describe("true when the patch has no content"),
  source_revision: z.string().nullable().describe("the commit the patch applies to"),
  model: z.string().nullable(),
  limitations: z.array(z.string()).describe("what the agent says it could not do"),
  exit_codes: z.record(z.string(), z.number().int()).describe('the exit codes the daemon reported, like {"agent": 0}'),
}).meta({ id: "RunArtifact" });

/** What an agent reports when it cannot go on without a person (docs/protocol.md, "Blockers"). */
export const BlockerReport = z.object({
  summary: z.string().min(1).max(BOUND_CEILINGS.blockerTextMaxChars).describe("what stops the agent, in a sentence or two"),
  evidence: z.array(z.string().max(BOUND_CEILINGS.blockerTextMaxChars)).max(BOUND_CEILINGS.blockerItemsMax).describe("what the agent saw that shows it"),
  questions: z.array(z.string().max(BOUND_CEILINGS.blockerTextMaxChars)).max(BOUND_CEILINGS.blockerItemsMax).describe("concrete questions for a person"),
  human_action: z.string().min(1).max(BOUND_CEILINGS.blockerTextMaxChars).describe("what a person must do before the run can go on"),
}).strict().meta({ id: "BlockerReport" });
export type BlockerReport = z.infer<typeof BlockerReport>;

/** A blocked run's blocker as stored: the report, the attempt that made it and when. */
export const RunBlocker = BlockerReport.extend({
  attempt: z.number().int().describe("the attempt whose agent reported it"),
  at_ms: epochMs,
}).meta({ id: "RunBlocker" });
/** A paused run's checkpoint as members see it: its description; the patch and session go to the claiming runner. */
export const RunCheckpoint = z.object({
  attempt: z.number().int().describe("the attempt whose daemon stored it"),
  session_id: z.string().nullable(),
  last_phase: z.string().nullable(),
  pending_actions: z.array(z.string()),
  source_revision: z.string().nullable(),
  note: z.string().nullable().describe("why it is partial, when it is"),
  patch_chars: z.number().int(),
  session_chars: z.number().int().nullable().describe("null when the agent gave no session"),
  at_ms: epochMs,
}).meta({ id: "RunCheckpoint" });

/** A run as POST /v1/runs, GET /v1/runs/:id and the cancel answer show it: every field, the same shape. */
/** A publication (docs/protocol.md, "Publication"): each step is recorded before the next side effect. */
export const RunPublication = z.object({
  branch: z.string().describe("docket/<run id>: the only branch the run pushes"),
  source_revision: z.string().nullable().describe("the revision the work was made on"),
  patch_digest: z.string().describe("sha256 (hex) of the published patch"),
  intent_at_ms: epochMs,
  head_sha: z.string().nullable().describe("the head the runner reported after its push; null until then"),
  pushed_at_ms: epochMs.nullable(),
  tries: z.number().int().describe("failed tries of the pull-request step so far (PUBLICATION_TRIES_MAX)"),
  create_requested_at_ms: epochMs.nullable().describe("when Docket last asked the host to create the pull request, recorded before asking"),
  next_try_at_ms: epochMs.nullable(),
  last_error: z.string().nullable().describe("why the last try of the pull-request step did not finish"),
  pr: z.object({ number: z.number().int(), url: z.string(), confirmed_at_ms: epochMs }).nullable().describe("the confirmed pull request; the run completes only once it is stored"),
}).meta({ id: "RunPublication" });
/** Why a queued run is not being worked (docs/protocol.md, "Why a run waits"). */
export const RunWaiting = z.object({
  reason: z
    .enum(["operator_hold", "recovery", "scheduler_gate", "launch_backoff", "no_runner", "behind_runs", "next_in_queue"])
    .describe("the first that holds, in this order: an operator hold, a recovery after an outage or a deploy, a scheduler gate, launch-failure backoff, no covering runner, runs ahead"),
  detail: z.object({
    message: z.string().describe("the reason in words"),
    until_ms: epochMs.optional().describe("launch_backoff: when the backoff ends"),
    missing_labels: z.array(z.string()).optional().describe("no_runner: labels the closest connected runner lacks (all the run's labels when none is connected)"),
    missing_protocol: z.string().nullable().optional().describe("no_runner: the run's protocol when no connected runner speaks it"),
    connected_runners: z.number().int().optional().describe("no_runner: connected runners compared"),
    closest_runner: machineId.nullable().optional().describe("no_runner: the connected runner closest to covering it"),
    managed_pool: z.string().optional().describe("no_runner: a running managed pool whose runners would cover it; its scaler starts one at a cron tick unless the pool runs max_instances"),
    ahead: z.number().int().optional().describe("behind_runs, next_in_queue: queued runs ahead of it in its queue"),
    gate: z.string().optional().describe("scheduler_gate: the gate that holds it"),
  }),
}).meta({ id: "RunWaiting" });

/** A queued run in dispatch order, with why it waits (GET /v1/queue). */
export const QueuedRun = z.object({
  id: runId,
  labels: z.array(z.string()),
  protocol: z.string(),
  priority: z.number().int(),
  queued_at_ms: epochMs,
  not_before_ms: epochMs,
  created_at_ms: epochMs,
  title: z.string().nullable().describe("the brief's first line, as the runs list gives it"),
  project_id: z.string().nullable().describe("the autopilot project that admitted the run; null for a run dispatched through the API"),
  waiting: RunWaiting,
}).meta({ id: "QueuedRun" });

export const QueuePage = z.object({
  runs: z.array(QueuedRun).describe("queued runs in dispatch order"),
  truncated: z.boolean().describe("true when more queued runs follow than `limit`"),
}).meta({ id: "QueuePage" });

export const QueueQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).optional().describe("at most this many runs (default 50, at most PAGE_SIZE_MAX)"),
});

/** A change of the run's state as its record keeps it (GET /v1/runs/:id, state_history). */
export const RunStateChange = z.object({
  from: RunState,
  to: RunState,
  reason: z.string(),
  attempt: z.number().int().describe("the attempt current at the change (0 before the first claim)"),
  at_ms: epochMs,
}).meta({ id: "RunStateChange" });

/** A recovery's failure to reconcile a run (docs/protocol.md, "Recovery"). */
export const RunRecoveryFailure = z.object({
  recovery_at_ms: epochMs.describe("the start of the recovery that passed over the run"),
  tries: z.number().int().describe("failed tries before it did (RECOVERY_RUN_TRIES_MAX)"),
  error: z.string().describe("the last try's error"),
}).meta({ id: "RunRecoveryFailure" });

export const Run = z.object({
  id: runId,
  org_id: orgId,
  state: RunState,
  attempt: z.number().int().describe("0 until the first claim, +1 per claim"),
  version: z.number().int().describe("+1 on every change"),
  brief: z.string(),
  repository: z.object({ url: z.string(), commit: z.string().nullable() }).nullable(),
  labels: z.array(z.string()).describe("runner labels a claiming machine must all have"),
  priority: z.number().int().describe("0–1000, higher claimed first"),
  launch: z.object({
    protocol: z.string(),
    command: z.array(z.string()),
    image: z.string().nullable(),
    env: z.record(z.string(), z.string()),
  }),
  callback_url: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
  project_id: z.string().nullable().optional().describe("the autopilot project that admitted the run (its scheduler gates apply); null for a run dispatched through the API"),
  continuation: z.enum(["implementing", "publishing"]).nullable().describe("where a paused or queued continuation resumes; null for new work"),
  hold: z.boolean().describe("true while an operator holds the run paused: only an explicit resume clears it"),
  checkpoint: RunCheckpoint.nullable().optional().describe("the latest checkpoint of a paused implementation"),
  recovery_problem: z.string().nullable().optional().describe("why the run cannot continue as it stands (checkpoint missing or unusable)"),
  recovery_failure: RunRecoveryFailure.nullable()
    .optional()
    .describe("a recovery after an outage or a deploy that could not reconcile the run and passed over it; null once a later recovery reconciled it"),
  pause_reason: z.string().nullable().optional().describe("why the run was last paused"),
  machine_id: machineId.nullable().describe("the machine holding the current attempt"),
  sandbox_id: z.string().nullable(),
  phase: z.string().nullable().describe("the last phase the daemon reported"),
  lease_expires_at_ms: epochMs.nullable(),
  launch_deadline_at_ms: epochMs.nullable().describe("when a claimed attempt not yet launched is requeued"),
  last_report_at_ms: epochMs.nullable(),
  not_before_ms: epochMs.describe("a queued run is not claimed before this (backoff after a launch failure)"),
  stop_request: z
    .object({ requested_at_ms: epochMs, reason: z.string().nullable(), by: z.string().describe("who asked, like member:<token id>") })
    .nullable()
    .describe("a recorded cancel request"),
  last_error: z.string().nullable(),
  blocker: RunBlocker.nullable().describe("why a blocked run waits for a human readiness change; null once a human authorized it again"),
  publication: RunPublication.nullable().optional().describe("an autopilot run's publication: its intent, push and pull request; null before one started"),
  artifact: RunArtifact.nullable().describe("the final report's result; null until a final report"),
  cost_cents: z.number().int().nullable().describe("the cost the final report gave"),
  steps: z.array(RunStep).describe("one entry per attempt, oldest first"),
  state_history: z
    .array(RunStateChange)
    .nullable()
    .describe("the run's changes of state, oldest first, from dispatch (queued) on: the newest RUN_STATE_HISTORY_MAX; null on a run stored before runs kept them (its run.state events tell)"),
  state_history_dropped: z.number().int().describe("older changes of state let go beyond RUN_STATE_HISTORY_MAX"),
  created_at_ms: epochMs,
  updated_at_ms: epochMs,
  ended_at_ms: epochMs.nullable(),
  callback: CallbackDelivery.nullable().describe("the completion callback's delivery; null without a callback_url"),
  waiting: RunWaiting.nullable().describe("why a queued (or operator-held) run waits; null in any other state"),
}).meta({ id: "Run" });
export type Run = z.infer<typeof Run>;

/** A listed run: its D1 queue row, not the whole run (GET /v1/runs/:id has the rest). */
export const RunSummary = z.object({
  id: runId,
  state: RunState,
  attempt: z.number().int(),
  version: z.number().int().describe("the run's version this row was written at"),
  priority: z.number().int(),
  labels_key: z.string().describe("the protocol and sorted labels a claiming runner must cover, as one key (process|gpu,linux)"),
  title: z.string().nullable().describe("the brief's first line, at most 200 characters (an autopilot run's: its issue's title); null on a run unchanged since Docket began keeping it"),
  repository: z.string().nullable().describe("the repository's URL; null without one"),
  project_id: z.string().nullable().describe("the autopilot project that admitted the run; null for a run dispatched through the API"),
  machine_id: machineId.nullable().describe("the machine of the latest attempt; null before the first claim"),
  not_before_ms: epochMs,
  created_at_ms: epochMs,
  started_at_ms: epochMs.nullable().describe("the first claim; null before it"),
  ended_at_ms: epochMs.nullable().describe("when the run ended; null while it has not"),
  updated_at_ms: epochMs,
}).meta({ id: "RunSummary" });

export const RunPage = page("runs", RunSummary);

/** One event of a run (docs/protocol.md, "Events"). */
export const RunEvent = z.object({
  seq: z.number().int().min(1).describe("its sequence number in the run, from 1, in order; the page's and the stream's cursor"),
  type: z.string().describe("run.created, run.state, run.phase, run.output, run.artifact, run.stop_requested, …"),
  at_ms: epochMs,
  data: z.record(z.string(), z.unknown()).describe("the event's details; its fields depend on type"),
}).meta({ id: "RunEvent" });
export type RunEvent = z.infer<typeof RunEvent>;

/** A page of a run's events, oldest first; next_cursor is null only on the last page of an ended run. */
export const RunEventPage = page("events", RunEvent).extend({
  terminal: z.boolean().describe("the run has ended (its last event may still be on a later page)"),
});

// ---- an admin's redelivery (docs/protocol.md, "Redelivery") ---------------------------------------

export const RedeliverEventsBody = z
  .object({ after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).describe("redeliver the events after this sequence number (default 0: all)").optional() })
  .strict();

export const RedeliverCallbackBody = z.object({}).strict();

export const RedeliveredEvents = z.object({
  run_id: runId,
  after: z.number().int(),
  requeued: z.number().int().describe("how many events were put back to be published"),
  outbox: z.object({
    unsent: z.number().int().describe("events not yet published"),
    exhausted: z.number().int().describe("unsent events whose publishing attempts ran out"),
    last_error: z.string().nullable(),
  }),
});

export const RedeliveredCallback = z.object({ run_id: runId, callback: CallbackDelivery });

// ---- tracker deliveries (docs/protocol.md, "Tracker deliveries") -----------------------------------

export const TRACKER_DELIVERY_KINDS = ["blocker_comment", "review_label", "pr_comment", "failure_comment"] as const;

export const TrackerDelivery = z.object({
  kind: z.enum(TRACKER_DELIVERY_KINDS).describe("blocker_comment: the blocker on the issue; review_label: ready label off, review label on; pr_comment: a link to the pull request; failure_comment: why the run failed"),
  ticket_key: z.string().describe("the ticket it goes to, like github:owner/repo#12"),
  project_id: z.string().describe("the autopilot project whose tracker credentials perform it"),
  status: z.enum(["pending", "delivered", "failed"]).describe("failed: the tries ran out; an operator may retry it"),
  tries: z.number().int().describe("tries made in the current round"),
  max_tries: z.number().int().describe("TRACKER_DELIVERY_MAX_ATTEMPTS"),
  last_error: z.string().nullable(),
  receipt: z.object({ comment_id: z.string(), url: z.string() }).nullable().describe("the tracker's comment, once delivered; null for labels"),
  created_at_ms: epochMs,
  last_try_at_ms: epochMs.nullable(),
  delivered_at_ms: epochMs.nullable(),
}).meta({ id: "TrackerDelivery" });

export const TrackerDeliveries = z.object({ run_id: runId, deliveries: z.array(TrackerDelivery).describe("at most one per kind, oldest first") });
export const TrackerDeliveryPath = z.object({ id: runId, kind: z.enum(TRACKER_DELIVERY_KINDS) });
export const RetryTrackerDeliveryBody = z.object({}).strict();
export const RetriedTrackerDelivery = z.object({ run_id: runId, delivery: TrackerDelivery });
