// An autopilot run's model-spend reservation and its cost review (docs/protocol.md, "Autopilot
// scheduler", "Run reservations and cost review").

import { z } from "zod";
import { autopilotProjectId } from "./autopilot.js";
import { ResolveBuildJobBody } from "./builds.js";
import { epochMs, keysetCursor, page, pageQuery, runId } from "./common.js";

/** held until the run ends; then settled, or cost_review / reconcile until an admin resolves it; released when never handed out. */
export const RESERVATION_STATUSES = ["held", "settled", "released", "cost_review", "reconcile"] as const;

export const ListRunReservationsQuery = z
  .object({
    status: z.enum(RESERVATION_STATUSES).optional(),
    ...pageQuery(keysetCursor("run_[0-9a-f]{24}")),
  })
  .strict();

export const RunReservationPath = z.object({ id: autopilotProjectId, run_id: runId });

/** The same body as a build job's resolution: the reconciled cost and why. */
export const ResolveRunReservationBody = ResolveBuildJobBody;

export const RunReservation = z
  .object({
    run_id: runId,
    project_id: autopilotProjectId,
    status: z.enum(RESERVATION_STATUSES),
    reserved_cents: z.number().int().describe("the project's per_run_cents, reserved at the run's first hand-out"),
    cost_cents: z.number().int().nullable().describe("the run's reported (or resolved) cost; null while unknown"),
    settled_cents: z.number().int().describe("spent from the reservation"),
    released_cents: z.number().int().describe("given back from the reservation"),
    charged_cents: z.number().int().describe("charged to available credit above the reservation by a resolution"),
    resolution: z
      .object({ note: z.string(), by: z.string().describe("member:<token id>"), at_ms: epochMs })
      .nullable()
      .describe("an admin's resolution of a reservation held for cost review or reconciliation"),
    created_at_ms: epochMs.describe("when it was reserved"),
    updated_at_ms: epochMs,
  })
  .meta({ id: "RunReservation" });
export type RunReservation = z.infer<typeof RunReservation>;

export const RunReservationPage = page("reservations", RunReservation);

