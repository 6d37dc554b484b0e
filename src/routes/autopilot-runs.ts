// An autopilot project's runs (docs/protocol.md, "Autopilot runs"): members list them with their
// issue, blocker, publication and tracker deliveries; retrying a failed delivery is
// POST /v1/runs/:id/deliveries/:kind/retry (src/routes/deliveries.ts).

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { listProjectRuns } from "../autopilot/project-runs";
import { loadProjectRow } from "../autopilot/projects";
import { pageSize } from "../lib/pagination";
import { operation } from "../openapi/operation";
import { AutopilotProjectPath } from "../protocol/autopilot";
import { AutopilotProjectRunPage, ListProjectRunsQuery } from "../protocol/autopilot-runs";
import { validate } from "../validate";

export const autopilotRunRoutes = new Hono<AppEnv>().get(
  "/autopilot/projects/:id/runs",
  operation({
    id: "listAutopilotProjectRuns",
    summary: "List an autopilot project's runs, with their blockers, publications and tracker deliveries",
    description:
      "The runs the project's admission created, newest first, optionally of one state (blocked: the runs waiting for a person, with their questions). " +
      "Each with its issue, its blocker, its publication (the pull request once stored) and its tracker deliveries with their status and last error.",
    tag: "Autopilot",
    auth: "member",
    responses: { 200: { description: "A page of the project's runs.", schema: AutopilotProjectRunPage } },
    errors: ["not_found"],
  }),
  validate("param", AutopilotProjectPath),
  validate("query", ListProjectRunsQuery),
  async (c) => {
    const orgId = c.get("caller").orgId;
    const project = await loadProjectRow(c.env.DB, orgId, c.req.valid("param").id);
    const q = c.req.valid("query");
    const config = c.get("config");
    const { runs, next } = await listProjectRuns(c.env, config, orgId, project.id, { state: q.state, cursor: q.cursor, limit: pageSize(q.limit, 50, config.pageSizeMax) });
    return c.json({ runs, next_cursor: next });
  },
);
