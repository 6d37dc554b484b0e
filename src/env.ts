import type { RunObject } from "../durable-objects/run-object";
import type { SchedulerObject } from "../durable-objects/scheduler-object";

export interface Env {
  DB: D1Database;
  RUN: DurableObjectNamespace<RunObject>;
  SCHEDULER: DurableObjectNamespace<SchedulerObject>;
  EVENTS: Queue<OutboxMessage>;
  /** The deployment's operator secret for POST /v1/orgs. */
  ADMIN_SECRET?: string;
  [name: string]: unknown;
}

/** One outbox event as it travels on the Queue. */
export interface OutboxMessage {
  run_id: string;
  org_id: string;
  seq: number;
  type: string;
  at_ms: number;
  data: Record<string, unknown>;
}
