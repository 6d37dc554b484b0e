// A project's last tracker error, where the operator looks (GET /v1/autopilot/projects/:id,
// docs/protocol.md "Autopilot projects"): a webhook GitHub was answered 202 for, or a cron pass,
// that then could not read GitHub would otherwise change nothing anyone sees. Each door records
// its failure with why (the GitHubError's failure: no connection, no answer, credentials refused);
// a later read that succeeds clears it. The ticket whose issue a door was reading keeps its own
// (durable-objects/ticket-store.ts), in the same shape but for the issue number.

import { and, eq, isNotNull } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { autopilotProjects } from "../db/autopilot-schema";
import type { AdmissionDoor, TrackerLastError } from "./ticket-types";
import { GitHubError } from "./github/errors";
import { LinearError } from "./linear/errors";


export interface ProjectLastError extends TrackerLastError {
  /** The issue the door was reading, when it read one. */
  number: number | null;
}

/** `err` as a last error: its kind (the GitHubError's or LinearError's failure), its message (bounded) and when. */
export function trackerError(door: AdmissionDoor, err: unknown, nowMs: number): TrackerLastError {
  const failure = err instanceof GitHubError || err instanceof LinearError ? err.failure : "error";
  const message = err instanceof Error ? err.message : String(err);
  return { at_ms: nowMs, door, failure, message: message.slice(0, 1_000) };
}

/** Records why `door` could not read the project's tracker. Best effort: a failed write is not the caller's failure. */
export async function recordProjectError(db: D1Database, projectId: string, door: AdmissionDoor, err: unknown, number: number | null, nowMs: number): Promise<void> {
  const lastError: ProjectLastError = { ...trackerError(door, err, nowMs), number };
  await drizzle(db).update(autopilotProjects).set({ lastError: JSON.stringify(lastError) }).where(eq(autopilotProjects.id, projectId)).catch(() => undefined);
}

/** Clears the project's last error once a door read its tracker again. */
export async function clearProjectError(db: D1Database, projectId: string): Promise<void> {
  const set = and(eq(autopilotProjects.id, projectId), isNotNull(autopilotProjects.lastError));
  await drizzle(db).update(autopilotProjects).set({ lastError: null }).where(set).catch(() => undefined);
}

/** The stored last error as the API shows it. */
export function projectLastError(stored: string | null): ProjectLastError | null {
  return stored === null ? null : (JSON.parse(stored) as ProjectLastError);
}
