// An autopilot project's scheduler (docs/protocol.md, "Autopilot scheduler"): members read its
// gates, slots, budget and verdicts; admins enable, disable, drain and change it.

import { Hono, type Context } from "hono";
import type { AppEnv } from "../app-types";
import { loadProjectRow } from "../autopilot/projects";
import { changeScheduler, disableScheduler, drainScheduler, enableScheduler, readScheduler } from "../autopilot/scheduler-control";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { operation } from "../openapi/operation";
import { AutopilotProjectPath } from "../protocol/autopilot";
import { AutopilotScheduler, AutopilotSchedulerChange, UpdateSchedulerBody } from "../protocol/autopilot-scheduler";
import { validate } from "../validate";

const TAG = "Autopilot";

/** The project named in the path, which must be the caller's organization's. */
async function projectOf(c: Context<AppEnv>): Promise<{ orgId: string; projectId: string; by: string }> {
  const caller = c.get("caller");
  const row = await loadProjectRow(c.env.DB, caller.orgId, c.req.param("id") ?? "");
  return { orgId: caller.orgId, projectId: row.id, by: caller.tokenId };
}

const commandSpec = (id: string, summary: string, description: string) =>
  operation({
    id,
    summary,
    description,
    tag: TAG,
    auth: "admin",
    responses: { 200: { description: "The scheduler after the command, and the runs it paused, resumed or left.", schema: AutopilotSchedulerChange } },
    errors: ["not_found"],
  });

export const autopilotSchedulerRoutes = new Hono<AppEnv>()
  .get(
    "/autopilot/projects/:id/scheduler",
    operation({
      id: "getAutopilotScheduler",
      summary: "Read an autopilot project's scheduler",
      description: "Its gates, the runs holding its slots, its budget held, spent and left, and each gate's verdict on a new run now, with a reason.",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The project's scheduler.", schema: AutopilotScheduler } },
      errors: ["not_found"],
    }),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const { orgId, projectId } = await projectOf(c);
      return c.json(await readScheduler(c.env, orgId, projectId));
    },
  )
  .post(
    "/autopilot/projects/:id/scheduler/enable",
    commandSpec("enableAutopilotScheduler", "Enable (resume) an autopilot project's scheduler", "Admission and dequeue again (drain ends too); paused runs without an operator hold are queued again through the ordinary gates."),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const { orgId, projectId, by } = await projectOf(c);
      return c.json(await enableScheduler(c.env, c.get("config"), orgId, projectId, by));
    },
  )
  .post(
    "/autopilot/projects/:id/scheduler/disable",
    commandSpec("disableAutopilotScheduler", "Disable an autopilot project's scheduler", "Stops admission and dequeue, and asks the project's executing runs to pause (no operator hold)."),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const { orgId, projectId, by } = await projectOf(c);
      return c.json(await disableScheduler(c.env, orgId, projectId, by));
    },
  )
  .post(
    "/autopilot/projects/:id/scheduler/drain",
    commandSpec("drainAutopilotScheduler", "Drain an autopilot project's scheduler", "Stops admission and dequeue; running work goes on to its end. Enable ends the drain."),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const { orgId, projectId, by } = await projectOf(c);
      return c.json(await drainScheduler(c.env, orgId, projectId, by));
    },
  )
  .patch(
    "/autopilot/projects/:id/scheduler",
    operation({
      id: "updateAutopilotScheduler",
      summary: "Change an autopilot project's dispatch window, concurrency or budget",
      description: "Only the fields sent change. reset_budget: true starts the budget's spent count again at zero.",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The project's scheduler as changed.", schema: AutopilotScheduler } },
      errors: ["not_found"],
    }),
    validate("param", AutopilotProjectPath),
    validate("json", UpdateSchedulerBody),
    async (c) => {
      const body = c.req.valid("json");
      const max = c.get("config").autopilotSchedulerConcurrencyMax;
      if (typeof body.concurrency === "number" && body.concurrency > max) {
        throw new DocketError("invalid_request", `body concurrency: at most ${max} (AUTOPILOT_SCHEDULER_CONCURRENCY_MAX)`, { field: "concurrency" });
      }
      const { orgId, projectId, by } = await projectOf(c);
      const answer = await changeScheduler(c.env, orgId, projectId, {
        ...(body.window !== undefined ? { window: body.window && { days: body.window.days, start: body.window.start, end: body.window.end, timeZone: body.window.time_zone } } : {}),
        ...(body.concurrency !== undefined ? { concurrency: body.concurrency } : {}),
        ...(body.budget !== undefined ? { budget: body.budget && { limitCents: body.budget.limit_cents, perRunCents: body.budget.per_run_cents } } : {}),
        ...(body.reset_budget ? { resetBudget: true } : {}),
      });
      log("autopilot.scheduler_changed", { org: orgId, project: projectId, by, fields: Object.keys(body), reason: "an admin changed the project's scheduler" });
      return c.json(answer);
    },
  );
