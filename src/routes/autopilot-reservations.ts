// An autopilot project's run reservations (docs/protocol.md, "Run reservations and cost review"):
// members list them; an admin resolves one held for cost review or reconciliation.

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { loadProjectRow } from "../autopilot/projects";
import { listReservations, resolveReservation } from "../autopilot/run-reservations";
import { pageSize } from "../lib/pagination";
import { operation } from "../openapi/operation";
import { AutopilotProjectPath } from "../protocol/autopilot";
import { ListRunReservationsQuery, ResolveRunReservationBody, RunReservation, RunReservationPage, RunReservationPath } from "../protocol/run-reservations";
import { validate } from "../validate";
import { resolveHandler } from "./resolve-held";

const TAG = "Autopilot";

export const autopilotReservationRoutes = new Hono<AppEnv>()
  .get(
    "/autopilot/projects/:id/reservations",
    operation({
      id: "listAutopilotRunReservations",
      summary: "List an autopilot project's run reservations",
      description: "Each run's model-spend reservation, most recently reserved first, optionally with one status: what it held, what it cost and how it ended.",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "A page of run reservations.", schema: RunReservationPage } },
      errors: ["not_found"],
    }),
    validate("param", AutopilotProjectPath),
    validate("query", ListRunReservationsQuery),
    async (c) => {
      const orgId = c.get("caller").orgId;
      const project = await loadProjectRow(c.env.DB, orgId, c.req.valid("param").id);
      const q = c.req.valid("query");
      const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
      return c.json(await listReservations(c.env, { orgId, projectId: project.id, status: q.status, cursor: q.cursor, limit }));
    },
  )
  .post(
    "/autopilot/projects/:id/reservations/:run_id/resolve",
    operation({
      id: "resolveAutopilotRunReservation",
      summary: "Resolve a run reservation held for cost review or reconciliation with its reconciled cost (admin)",
      description:
        "Within the reservation the cost is settled and the rest released; a cost above it is charged to available credit, which must cover it. " +
        "The project's budget then counts the cost as spent and no longer as held.",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The reservation, settled.", schema: RunReservation } },
      errors: ["not_found", "reservation_not_held", "insufficient_credit"],
    }),
    validate("param", RunReservationPath),
    validate("json", ResolveRunReservationBody),
    resolveHandler(async (env, orgId, path: { id: string; run_id: string }, input) => {
      const project = await loadProjectRow(env.DB, orgId, path.id);
      return resolveReservation(env, { orgId, projectId: project.id, runId: path.run_id }, input);
    }),
  );
