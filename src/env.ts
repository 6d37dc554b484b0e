import type { RunObject } from "../durable-objects/run-object";
import type { SchedulerObject } from "../durable-objects/scheduler-object";
import type { TicketObject } from "../durable-objects/ticket-object";
import type { AutopilotMessage } from "./autopilot/queue";
import type { ManagedRunnerNamespace } from "./managed/runner-binding";

export interface Env {
  DB: D1Database;
  RUN: DurableObjectNamespace<RunObject>;
  SCHEDULER: DurableObjectNamespace<SchedulerObject>;
  EVENTS: Queue<OutboxMessage>;
  /** Autopilot: one object per tracker ticket, and the queue the webhook hands its work to. */
  TICKET: DurableObjectNamespace<TicketObject>;
  AUTOPILOT: Queue<AutopilotMessage>;
  /** Managed runners' containers, one per pool slot (docs/managed-runners.md); absent where Containers are off. */
  MANAGED_RUNNER?: ManagedRunnerNamespace;
  /** Rate limits (src/rate-limit.ts): failed authentication per address, calls per member token, per runner token. */
  RATE_LIMIT_ADDRESS?: RateLimit;
  RATE_LIMIT_MEMBER?: RateLimit;
  RATE_LIMIT_RUNNER?: RateLimit;
  /** Static files: the /docs page's renderer (wrangler.toml, [assets]). */
  ASSETS?: Fetcher;
  /** The deployed Worker version (wrangler.toml, version_metadata): a new one starts a recovery (src/sweep.ts). */
  CF_VERSION_METADATA?: WorkerVersionMetadata;
  /** The deployment's operator secret for POST /v1/orgs. */
  ADMIN_SECRET?: string;
  /** The deployment secret autopilot projects' secrets are encrypted under (src/autopilot/secrets.ts). */
  AUTOPILOT_SECRET_KEY?: string;
  [name: string]: unknown;
}

/** One outbox event as it travels on the Queue. */
export interface OutboxMessage {
  run_id: string;
  org_id: string;
  seq: number;
  type: string;
  at_ms: number;
  /** The run attempt the event happened in (also data.attempt): every log line about it names it. */
  attempt: number;
  data: Record<string, unknown>;
}
