// The runner protocol: registration, heartbeat, claim, the attempt calls and the daemon's reports
// (../shared/spec/dispatch-lifecycle.md; docs/protocol.md, "Runner protocol" and "Runners").

import { z } from "zod";
import { BOUND_CEILINGS } from "./bounds.js";
import { BlockerReport } from "./runs.js";
import { attemptNumber, cliVersion, epochMs, keysetCursor, labelList, machineId, orgId, page, pageQuery, protocolList, runId } from "./common.js";

// ---- requests ----------------------------------------------------------------------------------

export const RegisterBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    labels: labelList.optional(),
    protocols: protocolList,
    cli_version: cliVersion,
  })
  .strict();
export type RegisterBody = z.input<typeof RegisterBody>;

// `labels`, when sent, replaces the machine's labels: `docket-runner listen --label` serves other labels than it registered with.
export const HeartbeatBody = z.object({ cli_version: cliVersion, protocols: protocolList, labels: labelList.optional() }).strict();
export type HeartbeatBody = z.input<typeof HeartbeatBody>;

export const ClaimBody = z
  .object({ cli_version: cliVersion, protocols: protocolList, wait_ms: z.number().int().min(0).max(600_000).optional() })
  .strict();
export type ClaimBody = z.input<typeof ClaimBody>;

/** A stopping runner ends the claim it leaves waiting: nothing to send. */
export const CancelClaimBody = z.object({}).strict();
export type CancelClaimBody = z.input<typeof CancelClaimBody>;

export const ListRunnersQuery = z.object(pageQuery(keysetCursor("mch_[0-9a-f]{24}"))).strict();

export const RunnerPath = z.object({ id: machineId });
export const AttemptPath = z.object({ id: runId, n: attemptNumber });
export const ReportPath = z.object({ id: runId });

/**
 * A launched or lease call may wait: renewed at once, it answers after wait_ms (at most
 * LEASE_WAIT_MAX_MS) or as soon as the run's directives change (a stop request), so a stop reaches
 * the runner without polling.
 */
const leaseWait = z.number().int().min(0).max(600_000).optional()
  .describe("Wait up to this long (capped by the server's LEASE_WAIT_MAX_MS) for a stop request before answering; 0 or absent answers at once.");
export const LaunchedBody = z.object({ sandbox_id: z.string().min(1).max(200), wait_ms: leaseWait }).strict();
export type LaunchedBody = z.input<typeof LaunchedBody>;
export const LeaseBody = z.object({ wait_ms: leaseWait }).strict();

export const PushCredentialBody = z.object({}).strict();
export const PushedBody = z
  .object({ branch: z.string().min(1).max(255), head_sha: z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, "a full commit id (40 or 64 hex digits)") })
  .strict();
export type PushedBody = z.input<typeof PushedBody>;

/** What the runner pushes with (docs/protocol.md, "Publication"): short-lived, never stored, never given to a sandbox. */
export const PushCredential = z.object({
  run_id: runId,
  attempt: z.number().int(),
  token: z.string().describe("An installation token that may write this one repository's contents; send it only with the push."),
  expires_at_ms: epochMs,
  push_url: z.string().describe("The repository to push to."),
  branch: z.string().describe("Push HEAD to refs/heads/<branch>."),
  source_revision: z.string().nullable(),
  patch_digest: z.string(),
}).meta({ id: "PushCredential" });
export type PushCredential = z.infer<typeof PushCredential>;
export type LeaseBody = z.input<typeof LeaseBody>;
export const LaunchFailedBody = z.object({ error: z.string().min(1).max(4_000) }).strict();
export type LaunchFailedBody = z.input<typeof LaunchFailedBody>;
export const StoppedBody = z.object({ sandbox_id: z.string().max(200).optional(), reason: z.string().max(4_000).optional() }).strict();
export type StoppedBody = z.input<typeof StoppedBody>;

export const ReportBody = z
  .object({
    // The report's sequence number within its attempt (1, 2, …): a retry sends the same seq again.
    seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
    phase: z.string().min(1).max(64).nullable().optional(),
    lines: z.array(z.string().max(100_000)).max(BOUND_CEILINGS.reportLinesMax).optional(),
    final: z
      .object({
        outcome: z.enum(["completed", "failed", "blocked"]).describe("blocked: the agent needs a person; `blocker` says why"),
        error: z.string().max(4_000).nullable().optional(),
        exit_codes: z.record(z.string().max(64), z.number().int()).optional(),
        artifact: z
          .object({
            patch: z.string().max(BOUND_CEILINGS.artifactPatchMaxChars),
            source_revision: z.string().max(64).nullable().optional(),
            model: z.string().max(200).nullable().optional(),
            limitations: z.array(z.string().max(2_000)).max(100).optional(),
          })
          .strict()
          .nullable()
          .optional(),
        cost_cents: z.number().int().min(0).nullable().optional(),
        blocker: BlockerReport.optional().describe("required with outcome blocked, refused with any other"),
      })
      .strict()
      .refine((f) => (f.outcome === "blocked") === (f.blocker !== undefined), {
        message: "a blocked outcome carries a blocker, and only a blocked outcome does",
        path: ["blocker"],
      })
      .nullable()
      .optional(),
  })
  .strict();
export type ReportBody = z.input<typeof ReportBody>;

/** The daemon's checkpoint of a pausing attempt (docs/protocol.md, "Pause and resume"). */
export const CheckpointBody = z
  .object({
    session_id: z.string().min(1).max(200).nullable().optional(),
    last_phase: z.string().min(1).max(64).nullable().optional(),
    pending_actions: z.array(z.string().max(2_000)).max(100).optional(),
    session: z.unknown().describe("the agent's session, any JSON value; bounded by CHECKPOINT_SESSION_MAX_CHARS as JSON text").optional(),
    patch: z.string().max(BOUND_CEILINGS.artifactPatchMaxChars).describe("the work so far, a unified diff on source_revision"),
    source_revision: z.string().max(64).nullable().optional(),
    note: z.string().max(4_000).nullable().optional().describe("why the checkpoint is partial, e.g. the agent ignored the request and was stopped"),
  })
  .strict();
export type CheckpointBody = z.input<typeof CheckpointBody>;

export const CheckpointUnusableBody = z.object({ reason: z.string().min(1).max(4_000) }).strict();
export type CheckpointUnusableBody = z.input<typeof CheckpointUnusableBody>;

// ---- answers -----------------------------------------------------------------------------------

/** A runner machine as members see it. */
export const Runner = z.object({
  id: machineId,
  name: z.string(),
  labels: z.array(z.string()),
  protocols: z.array(z.string()),
  cli_version: z.string().describe("The CLI version of its last registration, heartbeat or claim."),
  registered_at_ms: epochMs,
  last_seen_at_ms: epochMs,
  deregistered_at_ms: epochMs.nullable(),
}).meta({ id: "Runner" });
export type Runner = z.infer<typeof Runner>;

export const RunnerPage = page("runners", Runner);

/** The timings and versions a runner follows, as this deployment configures them. */
export const RunnerConfig = z.object({
  lease_ttl_ms: z.number().int().describe("How long a lease lasts from its last renewal."),
  lease_refresh_ms: z.number().int().describe("How often a runner renews the lease of each attempt it holds."),
  heartbeat_interval_ms: z.number().int(),
  claim_wait_ms: z.number().int().describe("How long a claim waits for work when it sends no wait_ms."),
  sandbox_lifetime_ms: z.number().int().describe("The longest a sandbox may run before the runner stops it."),
  min_cli_version: z.string(),
  protocols: z.array(z.string()).describe("The launch protocols this server supports."),
}).meta({ id: "RunnerConfig" });
export type RunnerConfig = z.infer<typeof RunnerConfig>;

export const Registered = z.object({
  machine_id: machineId,
  machine_token: z.string().describe("The machine's credential; shown once."),
  org_id: orgId,
  config: RunnerConfig,
});
export type Registered = z.infer<typeof Registered>;

export const HeartbeatAnswer = z.object({
  machine_id: machineId,
  server_time_ms: epochMs,
  config: RunnerConfig,
});
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswer>;

export const ClaimCancelled = z.object({
  machine_id: machineId,
  /** The machine's waiting claims this call ended (0 when none was waiting). */
  ended: z.number().int().min(0),
});
export type ClaimCancelled = z.infer<typeof ClaimCancelled>;

/** What an attempt runs: its launch protocol, command, image and environment. */
const GrantLaunch = z.object({
  protocol: z.string(),
  command: z.array(z.string()),
  image: z.string().nullable(),
  env: z.record(z.string(), z.string()),
});

/** A claimed attempt: its run-attempt token, its lease, and what to run. */
export const ClaimGrant = z.object({
  run_id: runId,
  attempt: z.number().int().min(1),
  attempt_token: z.string().describe("The run-attempt token: the credential of this attempt's reports."),
  lease_expires_at_ms: epochMs,
  lease_ttl_ms: z.number().int(),
  lease_refresh_ms: z.number().int(),
  launch_deadline_at_ms: epochMs.describe("By then the runner reports launched or launch-failed, or the attempt is taken back."),
  sandbox_lifetime_ms: z.number().int(),
  brief: z.string(),
  repository: z.object({ url: z.string(), commit: z.string().nullable() }).nullable(),
  launch: GrantLaunch,
  publication: z
    .object({ branch: z.string(), source_revision: z.string().nullable(), patch: z.string() })
    .optional()
    .describe("Present on a push-only job (a publication continuation): apply the patch at the source revision and push the branch; no agent runs."),
  checkpoint: z
    .object({
      attempt: z.number().int().describe("the attempt that stored it"),
      session_id: z.string().nullable(),
      last_phase: z.string().nullable(),
      pending_actions: z.array(z.string()),
      session: z.string().nullable().describe("the agent's session as the JSON text of what it gave; null when it gave none"),
      patch: z.string().describe("the work to restore, a unified diff on source_revision"),
      source_revision: z.string().nullable(),
      note: z.string().nullable(),
      at_ms: epochMs,
    })
    .nullable()
    .optional()
    .describe("a continuation's checkpoint: verify and restore it before launching (docs/protocol.md, \"Pause and resume\"); null or absent for new work"),
}).meta({ id: "ClaimGrant" });
export type ClaimGrant = z.infer<typeof ClaimGrant>;

/** The run states (../shared/DESIGN.md, "The run state machine"). */
const ATTEMPT_RUN_STATES = ["queued", "claimed", "implementing", "pausing", "paused", "blocked", "publishing", "completed", "failed", "cancelled"] as const;

/** What an attempt call or a report answers: the run's state as this attempt now sees it. */
export const AttemptAnswer = z.object({
  run_id: runId,
  attempt: z.number().int(),
  state: z.enum(ATTEMPT_RUN_STATES),
  lease_expires_at_ms: epochMs.nullable(),
  stop_requested: z.boolean().describe("A stop was requested: the runner stops the sandbox and reports stopped."),
  pause_requested: z.boolean().optional().describe("The run is pausing: the runner asks the daemon to checkpoint (docs/protocol.md, \"Pause and resume\")."),
}).meta({ id: "AttemptAnswer" });
export type AttemptAnswer = z.infer<typeof AttemptAnswer>;
