// ---- Autopilot admission: the webhook, reconcile and tickets operations -----------------------
// (docs/protocol.md, "Autopilot admission"; ../shared/spec/run-lifecycle.md, "Admission"). A block
// of its own, self-contained, so the projects' schemas can sit beside it.

import { z } from "zod";
import { epochMs, keysetCursor, page, pageQuery, prefixedId, runId } from "./common.js";

/** The project of an admission operation's path. */
export const AdmissionProjectPath = z.object({ id: prefixedId("apj", "an autopilot project") });

/** A ticket's provider-qualified identity, such as github:owner/repo#12. */
const TICKET_KEY_SOURCE = "github:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\\d{1,10}";
export const ticketKeyField = z.string().describe("The ticket's provider-qualified identity, such as github:owner/repo#12.");

/** The webhook's answer: 202 whether the delivery is handed on or ignored (with the reason). */
export const WebhookAccepted = z.object({
  delivery_id: z.string(),
  event: z.string(),
  queued: z.boolean().describe("Handed to admission; false when the delivery is ignored (see ignored_reason)."),
  ignored_reason: z.string().nullable(),
});
export type WebhookAccepted = z.infer<typeof WebhookAccepted>;

const outcome = z
  .enum(["duplicate_delivery", "admitted", "already_admitted", "unchanged", "refused", "capacity_wait", "lapsed"])
  .describe(
    "admitted: a run was created; already_admitted: the ticket's run is unfinished; unchanged: this readiness generation already had its run; " +
      "refused / capacity_wait: no run, see reasons; lapsed: the queued run was withdrawn (cancelled) because the issue is no longer eligible; " +
      "duplicate_delivery: this webhook delivery was seen before.",
  );

export const AdmissionOutcome = z.object({
  ticket: ticketKeyField,
  outcome,
  run_id: runId.nullable(),
  reasons: z.array(z.string()),
});

/** An operator's (or the cron's) reconciliation of one project, one bounded step of its pass. */
export const ReconcileResult = z.object({
  project_id: z.string(),
  door: z.enum(["webhook", "reconcile", "startup", "operator"]),
  examined: z.number().int(),
  results: z.array(AdmissionOutcome),
  failures: z.array(z.object({ number: z.number().int(), reason: z.string() })).describe("Issues whose facts could not be read; the next pass tries them again."),
  pass_complete: z.boolean().describe("The pass reached its end; otherwise the next call (or cron tick) continues from the persisted cursor."),
});
export type ReconcileResult = z.infer<typeof ReconcileResult>;

export const ListTicketsQuery = z
  .object({
    status: z.enum(["idle", "admitting", "admitted", "refused", "capacity_wait", "lapsed", "done"]).optional(),
    ...pageQuery(keysetCursor(TICKET_KEY_SOURCE)),
  })
  .strict();

export const AutopilotTicket = z.object({
  ticket: ticketKeyField,
  number: z.number().int(),
  status: z
    .enum(["idle", "admitting", "admitted", "refused", "capacity_wait", "lapsed", "done"])
    .describe("admitting: its admission is under way (it holds a queue place); admitted: its run is unfinished; refused: not eligible or not authorized (reasons); capacity_wait: eligible but the project's queue is full; lapsed: its queued run was withdrawn; done: its run ended."),
  reasons: z.array(z.string()),
  generation: z.string().nullable().describe("The readiness generation: the tracker's id of the ready label's latest addition."),
  run_id: runId.nullable().describe("The ticket's unfinished run, if any."),
  updated_at_ms: epochMs,
});
export const TicketPage = page("tickets", AutopilotTicket);

export const AdmissionTicketPath = AdmissionProjectPath.extend({ number: z.coerce.number().int().min(1).max(9_999_999_999) });

/** One entry of a ticket's history: an admission, a refusal, a capacity wait, a lapse, or its run's end. */
export const TicketHistoryEntry = z.object({
  at_ms: epochMs,
  kind: z.enum(["admitted", "refused", "capacity_wait", "lapsed", "run_ended"]),
  door: z.enum(["webhook", "reconcile", "startup", "operator"]),
  generation: z.string().nullable(),
  run_id: runId.nullable(),
  reasons: z.array(z.string()),
  basis: z
    .enum(["human", "trusted_actor_assumption"])
    .nullable()
    .describe("An admission's authorization: a person's ready transition, or the project's trusted_actor_assumption (no person confirmed)."),
  actor: z.string().nullable().describe("The login whose ready transition an admission relied on."),
});

export const AutopilotTicketDetail = AutopilotTicket.extend({
  admitted_generation: z.string().nullable().describe("The readiness generation that had its run; the same generation never admits another."),
  history: z.array(TicketHistoryEntry).describe("Newest first, at most AUTOPILOT_HISTORY_MAX entries."),
});
