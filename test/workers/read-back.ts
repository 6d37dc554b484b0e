// A read-back of everything one organization owns, to show that a refused call changed nothing:
// every D1 row of the organization (the Queue's copies of events arrive on their own, so not
// those), and through the API its runs, their events, its build jobs and its credit.

import { env } from "cloudflare:workers";
import { callDirect } from "./direct";

type Json = Record<string, any>;

/** The SELECT of one D1 table's rows of an organization; `scoped` when it binds the organization's id. */
type TableRead = { name: string; sql: string; scoped: boolean };

/** One per D1 table; read once, as the schema does not change within a file. */
let tableReads: Promise<TableRead[]> | null = null;

function readsOfTables(): Promise<TableRead[]> {
  tableReads ??= (async () => {
    const tables = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'd1_%' AND name != 'events' ORDER BY name",
    ).all<{ name: string }>();
    return Promise.all(
      tables.results.map(async ({ name }) => {
        const columns = (await env.DB.prepare(`PRAGMA table_info(${name})`).all<{ name: string }>()).results.map((c) => c.name);
        const where = columns.includes("org_id") ? "WHERE org_id = ?1" : name === "orgs" ? "WHERE id = ?1" : "";
        return { name, sql: `SELECT * FROM ${name} ${where}`, scoped: where !== "" };
      }),
    );
  })();
  return tableReads;
}

export async function orgState(org: { orgId: string; admin: string; runIds?: string[]; jobIds?: string[] }): Promise<Json> {
  const read = (path: string) => callDirect("GET", path, { token: org.admin }).then((res) => res.body);
  const runIds = org.runIds ?? [];
  const jobIds = org.jobIds ?? [];
  // Every table in one D1 batch (one round trip, one consistent view), and the API reads beside it.
  const reads = await readsOfTables();
  const [results, runs, events, jobs, credits] = await Promise.all([
    env.DB.batch(reads.map((r) => (r.scoped ? env.DB.prepare(r.sql).bind(org.orgId) : env.DB.prepare(r.sql)))),
    Promise.all(runIds.map((id) => read(`/v1/runs/${id}`))),
    Promise.all(runIds.map((id) => read(`/v1/runs/${id}/events?limit=1000`))),
    Promise.all(jobIds.map((id) => read(`/v1/build-jobs/${id}`))),
    read("/v1/credits"),
  ]);
  const out: Json = {};
  reads.forEach((r, i) => (out[r.name] = results[i].results.map((row) => JSON.stringify(row)).sort()));
  runIds.forEach((id, i) => {
    // `waiting` is left out: it explains the run against the clock (a runner's connected window lapses), it is not stored.
    const { waiting: _waiting, ...run } = runs[i];
    out[`run ${id}`] = run;
    out[`events ${id}`] = events[i];
  });
  jobIds.forEach((id, i) => (out[`job ${id}`] = jobs[i]));
  out.credits = credits;
  return out;
}
