// Autopilot projects (docs/protocol.md, "Autopilot projects"; docs/autopilot.md): admins configure
// which GitHub repository's ready issues become runs, members read them. Secrets go in, never out.

import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { projectLastError } from "../autopilot/last-error";
import { changedProjectRow, checkProjectBounds, newProjectRow } from "../autopilot/project-input";
import { projectBudget } from "../autopilot/project-budget";
import { loadProjectRow, projectAnswer, type AutopilotProjectRow } from "../autopilot/projects";
import { requireSecretKey } from "../autopilot/secrets";
import { parseTracker, watchedName } from "../autopilot/tracker-config";
import { autopilotProjects } from "../db/autopilot-schema";
import { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { listPage, pageSize } from "../lib/pagination";
import { isUniqueViolation } from "../lib/unique-violation";
import { operation } from "../openapi/operation";
import {
  AutopilotProject,
  AutopilotProjectDetail,
  AutopilotProjectPage,
  AutopilotProjectPath,
  CreateAutopilotProjectBody,
  ListAutopilotProjectsQuery,
  UpdateAutopilotProjectBody,
} from "../protocol/autopilot";
import { validate } from "../validate";

const TAG = "Autopilot";

const origin = (url: string) => new URL(url).origin;

/** A second project on a repository (or Linear team) the organization already watches would admit its issues twice. */
async function writeOnce(write: () => Promise<unknown>, row: AutopilotProjectRow): Promise<void> {
  try {
    await write();
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    const tracker = parseTracker(row.tracker);
    throw new DocketError("autopilot_project_exists", `an autopilot project of this organization already watches ${watchedName(row.repository, tracker)}`, {
      field: tracker.kind === "github" ? "repository" : "tracker.team",
      repository: row.repository,
    });
  }
}

export const autopilotProjectRoutes = new Hono<AppEnv>()
  .post(
    "/autopilot/projects",
    operation({
      id: "createAutopilotProject",
      summary: "Create an autopilot project",
      description:
        "A GitHub repository whose issues, marked ready by a person, become runs. The webhook secret and the App's private key are stored encrypted and never shown again; the answer's webhook.url is where GitHub should deliver.",
      tag: TAG,
      auth: "admin",
      responses: { 201: { description: "The project, without its secrets.", schema: AutopilotProject } },
      errors: ["autopilot_project_exists", "autopilot_not_configured"],
    }),
    validate("json", CreateAutopilotProjectBody, checkProjectBounds),
    async (c) => {
      requireSecretKey(c.env);
      const caller = c.get("caller");
      const body = c.req.valid("json");
      const row = await newProjectRow(c.env, { id: newId("apj"), orgId: caller.orgId, createdBy: caller.tokenId }, body, Date.now());
      await writeOnce(() => drizzle(c.env.DB).insert(autopilotProjects).values(row), row);
      log("autopilot.project_created", { reason: "an admin created it", org: caller.orgId, project: row.id, repository: row.repository, by: caller.tokenId });
      return c.json(projectAnswer(row, origin(c.req.url)), 201);
    },
  )
  .get(
    "/autopilot/projects",
    operation({
      id: "listAutopilotProjects",
      summary: "List the organization's autopilot projects",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "A page of projects, newest first.", schema: AutopilotProjectPage } },
    }),
    validate("query", ListAutopilotProjectsQuery),
    async (c) => {
      const q = c.req.valid("query");
      const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
      const conditions = [eq(autopilotProjects.orgId, c.get("caller").orgId)];
      const { kept, next } = await listPage(c.env.DB, autopilotProjects, conditions, q.cursor, limit, { at: "createdAtMs" });
      const at = origin(c.req.url);
      return c.json({ projects: kept.map((row) => projectAnswer(row, at)), next_cursor: next });
    },
  )
  .get(
    "/autopilot/projects/:id",
    operation({
      id: "getAutopilotProject",
      summary: "Read an autopilot project",
      description:
        "The project without its secrets, with its GitHub budget (requests GitHub counted in the last hour, its installation's rate limit as GitHub last stated it) " +
        "and its reconciliation's state (paused under AUTOPILOT_GITHUB_RESERVE, the pass under way, when the last full pass finished).",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The project, without its secrets, with its GitHub budget.", schema: AutopilotProjectDetail } },
      errors: ["not_found"],
    }),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const row = await loadProjectRow(c.env.DB, c.get("caller").orgId, c.req.valid("param").id);
      const budget = await projectBudget(c.env.DB, c.get("config"), row);
      return c.json({ ...projectAnswer(row, origin(c.req.url)), ...budget, last_error: projectLastError(row.lastError) } satisfies AutopilotProjectDetail);
    },
  )
  .patch(
    "/autopilot/projects/:id",
    operation({
      id: "updateAutopilotProject",
      summary: "Change an autopilot project",
      description: "Only the fields sent change. A webhook_secret or github.private_key sent replaces the stored one; neither can be read back.",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The project as changed, without its secrets.", schema: AutopilotProject } },
      errors: ["not_found", "autopilot_project_exists", "autopilot_not_configured"],
    }),
    validate("param", AutopilotProjectPath),
    validate("json", UpdateAutopilotProjectBody, checkProjectBounds),
    async (c) => {
      const caller = c.get("caller");
      const body = c.req.valid("json");
      if (body.webhook_secret !== undefined || body.github?.private_key !== undefined) requireSecretKey(c.env);
      const row = await loadProjectRow(c.env.DB, caller.orgId, c.req.valid("param").id);
      const changed: AutopilotProjectRow = await changedProjectRow(c.env, row, body, Date.now());
      const { id, orgId, createdBy, createdAtMs, ...columns } = changed;
      await writeOnce(
        () => drizzle(c.env.DB).update(autopilotProjects).set(columns).where(and(eq(autopilotProjects.orgId, orgId), eq(autopilotProjects.id, id))),
        changed,
      );
      log("autopilot.project_changed", { reason: "an admin changed it", org: orgId, project: id, fields: Object.keys(body), by: caller.tokenId });
      return c.json(projectAnswer(changed, origin(c.req.url)));
    },
  );
