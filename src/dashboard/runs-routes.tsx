/** @jsxImportSource hono/jsx */
// The queue and the runs list (docs/dashboard.md).

import type { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { hourlyActivity } from "./activity";
import type { Api } from "./api";
import { isAdmin, page, read } from "./route-kit";
import { QueuePage, RunsPage } from "./runs-pages";

/** The queue (the dashboard's home) and the runs list. */
export function runsRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/", page(async (c) => {
    const config = c.get("config");
    const [queue, recent, activity] = await Promise.all([
      read(c, api, `/v1/queue?limit=${config.dashboardRowsMax}`),
      read(c, api, "/v1/runs?limit=20"),
      hourlyActivity(c.env.DB, config, c.get("caller").orgId, Date.now()),
    ]);
    return c.html(<QueuePage queue={queue} recent={recent.runs} activity={activity} admin={isAdmin(c)} />);
  }));
  dash.get("/runs", page(async (c) => c.html(<RunsPage runs={(await read(c, api, `/v1/runs?limit=${c.get("config").dashboardRowsMax}`)).runs} admin={isAdmin(c)} />)));
}
