/** @jsxImportSource hono/jsx */
// The queue and the runs list (README.md, "Dashboard"): the list's filters, paging and search by run id.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { runId } from "../protocol/common";
import { hourlyActivity } from "./activity";
import { apiCall, type Api, type ApiAnswer } from "./api";
import { isLiveRefresh, liveSettings } from "./live";
import { isAdmin, page, read, Refused } from "./route-kit";
import { QueuePage, RUN_FILTERS, RunsPage, runsHref, type FilterRefusal, type ProjectChoices, type RunFilters } from "./runs-pages";
import { DASH } from "./session";

/** The filters the page was asked for, as typed: the API checks them and names what is wrong. */
function filtersOf(c: Context<AppEnv>): RunFilters {
  const filters: RunFilters = {};
  for (const name of RUN_FILTERS) {
    const value = c.req.query(name)?.trim();
    if (value) filters[name] = value;
  }
  return filters;
}

/** The most projects the project filter offers by name (one page of GET /v1/autopilot/projects); past it, an id is typed. */
const PROJECT_CHOICES_MAX = 200;

/** The organization's autopilot projects by name for the project filter; none on a live refresh, which swaps only the list. */
async function projectChoices(c: Context<AppEnv>, api: Api): Promise<ProjectChoices> {
  if (isLiveRefresh(c)) return [];
  const listed = await read(c, api, `/v1/autopilot/projects?limit=${PROJECT_CHOICES_MAX}`);
  if (listed.next_cursor) return null;
  return (listed.projects as { id: string; name: string }[]).map((p) => ({ id: p.id, name: p.name }));
}

/** The runs page: the search by id (an exact id goes to the run), else a page of the filtered list. */
async function runsPage(c: Context<AppEnv>, api: Api): Promise<Response> {
  const filters = filtersOf(c);
  const wanted = c.req.query("run")?.trim();
  if (wanted && runId.safeParse(wanted).success) return c.redirect(`${DASH}/runs/${wanted}`, 303);
  const cursor = c.req.query("cursor") || undefined;
  const query = new URL(runsHref(filters, cursor), c.req.url).searchParams;
  query.set("limit", String(c.get("config").dashboardRowsMax));
  const [answer, projects] = await Promise.all([apiCall(c, api, "GET", `/v1/runs?${query}`), projectChoices(c, api)]);
  const refused = filterRefusal(answer);
  if (!answer.ok && !refused) throw new Refused(answer.status, answer.body.error ?? {});
  const list = answer.ok ? answer.body : { runs: [], next_cursor: null };
  const find = wanted ? { value: wanted, problem: `"${wanted}" is not a run id: a run id is run_ followed by 24 hexadecimal digits (0-9, a-f).` } : undefined;
  const html = (
    <RunsPage runs={list.runs} next={list.next_cursor} filters={filters} cursor={cursor} find={find} refused={refused} projects={projects} admin={isAdmin(c)} live={liveSettings(c)} />
  );
  return c.html(html, find || refused ? 400 : 200);
}

/** The API's refusal of one of the list's filters (or its cursor), which the page says beside its form; null for any other answer. */
function filterRefusal(answer: ApiAnswer): FilterRefusal | null {
  const error = answer.body?.error;
  if (answer.ok || answer.status !== 400 || error?.code !== "invalid_request") return null;
  const field = [...RUN_FILTERS, "cursor"].find((name) => name === error.field);
  return field ? { field, message: String(error.message) } : null;
}

/** The queue (the dashboard's home) and the runs list. */
export function runsRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/", page(async (c) => {
    const config = c.get("config");
    // A live refresh swaps only the lists: it does not read the last day's events for the charts again.
    const [queue, recent, activity] = await Promise.all([
      read(c, api, `/v1/queue?limit=${config.dashboardRowsMax}`),
      read(c, api, "/v1/runs?limit=20"),
      isLiveRefresh(c) ? null : hourlyActivity(c.env.DB, config, c.get("caller").orgId, Date.now()),
    ]);
    return c.html(<QueuePage queue={queue} recent={recent.runs} activity={activity} admin={isAdmin(c)} live={liveSettings(c)} />);
  }));
  dash.get("/runs", page((c) => runsPage(c, api)));
}
