/** @jsxImportSource hono/jsx */
// Credits: the balance, held credit and cost review, and resolving a build job held for review.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { openReservations } from "../autopilot/run-reservations";
import { HELD_JOB_STATUSES, REVIEW_JOB_STATUSES } from "../builds/states";
import { buildJobId } from "../protocol/builds";
import type { Api } from "./api";
import { CreditsPage } from "./credits-page";
import { act, doneNotice, isAdmin, page, pathParam, read, resolution, type Json } from "./route-kit";
import { DASH } from "./session";

/**
 * Every build job whose reservation is still held, of every such status (src/builds/states.ts), most
 * recently created first: the jobs the balance's Held accounts for.
 */
async function heldBuildJobs(c: Context<AppEnv>, api: Api, limit: number): Promise<Json[]> {
  const pages = await Promise.all(HELD_JOB_STATUSES.map((status) => read(c, api, `/v1/build-jobs?status=${status}&limit=${limit}`)));
  return pages.flatMap((p) => p.jobs as Json[]).sort((a, b) => b.created_at_ms - a.created_at_ms);
}

/** The credits page and a build job's resolution. */
export function creditsRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/credits", page(async (c) => {
    const limit = c.get("config").dashboardRowsMax;
    const [credits, heldJobs, paused, reservations] = await Promise.all([
      read(c, api, `/v1/credits?limit=${limit}`),
      heldBuildJobs(c, api, limit),
      read(c, api, `/v1/runs?state=paused&limit=${limit}`),
      openReservations(c.env.DB, c.get("caller").orgId, limit),
    ]);
    const review = heldJobs.filter((j) => REVIEW_JOB_STATUSES.includes(j.status));
    return c.html(<CreditsPage credits={credits} held={heldJobs} review={review} paused={paused.runs} reservations={reservations} admin={isAdmin(c)} notice={doneNotice(c)} />);
  }));
  // Resolutions of held credit, with the form's cost and note; the API validates both and checks the admin role.
  dash.post("/build-jobs/:id/resolve", page(async (c) => {
    const id = pathParam(c, "id", buildJobId);
    return act(c, api, "POST", `/v1/build-jobs/${encodeURIComponent(id)}/resolve`, await resolution(c), `${DASH}/credits?done=build+job+${encodeURIComponent(id)}+resolved`);
  }));
}
