/** @jsxImportSource hono/jsx */
// Live lists: the status line and the script that refreshes a page's data-live regions (assets.ts,
// live-lists.js), at the configured interval. A page marks each region with data-live and an id.

import type { Context } from "hono";
import type { AppEnv } from "../app-types";
import { LIVE_LISTS_SCRIPT, LIVE_REFRESH_HEADER } from "./assets";

/** How often a page's live regions refresh, and after how many failures in a row they stop. */
export interface LiveSettings {
  pollMs: number;
  failuresMax: number;
}

export function liveSettings(c: Context<AppEnv>): LiveSettings {
  const config = c.get("config");
  return { pollMs: config.dashboardLivePollMs, failuresMax: config.dashboardLiveFailuresMax };
}

/** Whether this request is the live-lists script's refresh, which uses only the page's data-live regions. */
export function isLiveRefresh(c: Context<AppEnv>): boolean {
  return c.req.header(LIVE_REFRESH_HEADER) === "1";
}

/** The status line the script speaks through, then the script itself; without JavaScript the line says a reload updates the page. */
export function LiveUpdates(props: { live: LiveSettings }) {
  return (
    <>
      <p id="live-status" role="status" class="muted">Reload the page to see changes.</p>
      <script src={LIVE_LISTS_SCRIPT} defer data-poll-ms={String(props.live.pollMs)} data-failures-max={String(props.live.failuresMax)}></script>
    </>
  );
}
