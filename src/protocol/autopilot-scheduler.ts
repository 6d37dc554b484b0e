// The autopilot scheduler's schemas (docs/protocol.md, "Autopilot scheduler";
// ../shared/spec/run-lifecycle.md, "Admission"): a project's dispatch window, budget, concurrency
// and the gates a claim passes. Apart from the projects' schemas (./autopilot.ts), which only
// lend it the project id.

import { z } from "zod";
import { autopilotProjectId } from "./autopilot.js";
import { epochMs, runId } from "./common.js";

// ---- the autopilot scheduler (docs/protocol.md, "Autopilot scheduler") --------------------------

const hhmm = z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/, 'a time of day "HH:MM", 00:00 to 23:59');

export const DispatchWindowBody = z
  .object({
    days: z
      .array(z.enum(["sun", "mon", "tue", "wed", "thu", "fri", "sat"]))
      .min(1)
      .max(7)
      .refine((d) => new Set(d).size === d.length, "each day at most once")
      .describe("The days on which the window opens (an overnight window runs on into the next day)."),
    start: hhmm,
    end: hhmm.describe("End of the window, exclusive; before start, the window runs overnight."),
    time_zone: z
      .string()
      .min(1)
      .max(64)
      .refine((tz) => {
        try {
          new Intl.DateTimeFormat("en-US", { timeZone: tz });
          return true;
        } catch {
          return false;
        }
      }, "must be an IANA time zone such as Europe/Berlin or UTC"),
  })
  .strict()
  .refine((w) => w.start !== w.end, { message: "start and end must differ", path: ["end"] });

const cents = z.number().int().min(0).max(1_000_000_000_000);

export const SchedulerBudgetBody = z
  .object({
    limit_cents: cents.describe("What the project's runs may hold and spend together until the next reset."),
    per_run_cents: cents.describe("Reserved from the organization's credit when a run is first handed out; settled when it ends."),
  })
  .strict()
  .refine((b) => b.per_run_cents <= b.limit_cents, { message: "per_run_cents cannot exceed limit_cents", path: ["per_run_cents"] });

export const UpdateSchedulerBody = z
  .object({
    window: DispatchWindowBody.nullable().optional().describe("null: always open."),
    concurrency: z.number().int().min(1).nullable().optional().describe("Runs of the project holding a slot at once; null: AUTOPILOT_SCHEDULER_CONCURRENCY_DEFAULT."),
    budget: SchedulerBudgetBody.nullable().optional().describe("null: no model-spend authorization required."),
    reset_budget: z.literal(true).optional().describe("Starts the budget's spent count again at zero; held reservations stay held."),
  })
  .strict()
  .refine((b) => Object.keys(b).length > 0, "send at least one of window, concurrency, budget, reset_budget");

const GateVerdict = z.object({
  gate: z.enum(["enabled", "drain", "window", "concurrency", "budget"]),
  open: z.boolean(),
  reason: z.string(),
});

export const AutopilotScheduler = z.object({
  project_id: autopilotProjectId,
  enabled: z.boolean().describe("false: nothing of the project is handed out or admitted, and its executing runs were asked to pause."),
  draining: z.boolean().describe("true: running work finishes; nothing new is admitted or handed out."),
  admission: z.object({ open: z.boolean(), reason: z.string().nullable() }).describe('Whether tickets are admitted now; reason "scheduler disabled" or "draining" when not.'),
  window: z.object({ days: z.array(z.string()), start: z.string(), end: z.string(), time_zone: z.string() }).nullable(),
  concurrency: z.object({
    limit: z.number().int(),
    configured: z.number().int().nullable().describe("null: the deployment's default applies."),
    in_use: z.number().int(),
    slots: z.array(z.object({ run_id: runId, attempt: z.number().int().min(0), taken_at_ms: epochMs })).describe("The run attempts holding a slot (claimed, implementing, pausing, publishing); 0: a slot taken before slots were kept per attempt."),
  }),
  budget: z
    .object({
      limit_cents: z.number().int(),
      per_run_cents: z.number().int(),
      held_cents: z.number().int().describe("Reserved by unfinished runs, and by ended runs whose cost awaits review."),
      spent_cents: z.number().int().describe("Settled cost since the last reset."),
      left_cents: z.number().int(),
      reset_at_ms: epochMs.nullable(),
    })
    .nullable(),
  verdicts: z.array(GateVerdict).describe("Each gate's verdict on a new run now, with its reason."),
  updated_at_ms: epochMs.nullable(),
});
export type AutopilotScheduler = z.infer<typeof AutopilotScheduler>;

export const AutopilotSchedulerChange = z.object({
  scheduler: AutopilotScheduler,
  paused: z.array(runId).describe("disable: executing runs asked to pause (no operator hold)."),
  resumed: z.array(runId).describe("enable: paused runs without an operator hold, queued again."),
  skipped: z.array(z.object({ run_id: runId, reason: z.string() })).describe("Runs left as they were, with the reason."),
});
