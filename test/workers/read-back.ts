// A read-back of everything one organization owns, to show that a refused call changed nothing:
// every D1 row of the organization (the Queue's copies of events arrive on their own, so not
// those), and through the API its runs, their events, its build jobs and its credit.

import { env } from "cloudflare:workers";
import { callDirect } from "./direct";

type Json = Record<string, any>;

export async function orgState(org: { orgId: string; admin: string; runIds?: string[]; jobIds?: string[] }): Promise<Json> {
  const out: Json = {};
  const tables = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'd1_%' ORDER BY name",
  ).all<{ name: string }>();
  for (const { name } of tables.results) {
    if (name === "events") continue;
    const columns = (await env.DB.prepare(`PRAGMA table_info(${name})`).all<{ name: string }>()).results.map((c) => c.name);
    const where = columns.includes("org_id") ? "WHERE org_id = ?1" : name === "orgs" ? "WHERE id = ?1" : "";
    const stmt = env.DB.prepare(`SELECT * FROM ${name} ${where}`);
    out[name] = (await (where ? stmt.bind(org.orgId) : stmt).all()).results.map((r) => JSON.stringify(r)).sort();
  }
  for (const id of org.runIds ?? []) {
    // `waiting` is left out: it explains the run against the clock (a runner's connected window lapses), it is not stored.
    const { waiting: _waiting, ...run } = (await callDirect("GET", `/v1/runs/${id}`, { token: org.admin })).body;
    out[`run ${id}`] = run;
    out[`events ${id}`] = (await callDirect("GET", `/v1/runs/${id}/events?limit=1000`, { token: org.admin })).body;
  }
  for (const id of org.jobIds ?? []) out[`job ${id}`] = (await callDirect("GET", `/v1/build-jobs/${id}`, { token: org.admin })).body;
  out.credits = (await callDirect("GET", "/v1/credits", { token: org.admin })).body;
  return out;
}
