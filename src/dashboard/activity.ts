// The organization's last day, hour by hour: queue depth at each hour's end, runs started (first
// claim) and runs ended, derived from the run events stored in D1 and the queue as it is now.

import { and, asc, count, desc, eq, gte, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { events, runs } from "../db/schema";
import { TERMINAL_STATES } from "../run/states";

export const HOUR_MS = 3_600_000;
export const ACTIVITY_HOURS = 24;

export interface HourlyActivity {
  /** Start of each hour, oldest first; the last is the current, partial hour. */
  hourStartMs: number[];
  queueDepth: number[];
  started: number[];
  ended: number[];
  /** True when the window held more events than DASHBOARD_ACTIVITY_EVENTS_MAX: older hours are incomplete. */
  truncated: boolean;
}

interface EventRow {
  type: string;
  data: string;
  at_ms: number;
}

/** How an event changed the number of queued runs: created runs start queued; state hops in and out of queued. */
function queueDelta(type: string, data: { from?: string; to?: string }): number {
  if (type === "run.created") return 1;
  return (data.to === "queued" ? 1 : 0) - (data.from === "queued" ? 1 : 0);
}

function hourOf(atMs: number, firstHour: number): number {
  return Math.max(0, Math.min(ACTIVITY_HOURS - 1, Math.floor((atMs - firstHour) / HOUR_MS)));
}

/**
 * The highest queue depth within each hour. Walks back from the queue as it is now through the
 * events, newest first: before an event the depth was what it is after, less what the event added.
 */
function peakDepths(eventsNewestFirst: EventRow[], firstHour: number, queuedNow: number): number[] {
  const peak = Array.from({ length: ACTIVITY_HOURS }, () => 0);
  let depth = queuedNow;
  let hour = ACTIVITY_HOURS - 1;
  peak[hour] = depth;
  for (const event of eventsNewestFirst) {
    const at = hourOf(event.at_ms, firstHour);
    // Hours without events held the depth the next event found.
    while (hour > at) peak[--hour] = Math.max(0, depth);
    depth -= queueDelta(event.type, JSON.parse(event.data) as { from?: string; to?: string });
    peak[hour] = Math.max(peak[hour], depth);
  }
  while (hour > 0) peak[--hour] = Math.max(0, depth);
  return peak;
}

export async function hourlyActivity(db: D1Database, config: Config, orgId: string, nowMs: number): Promise<HourlyActivity> {
  const firstHour = Math.floor(nowMs / HOUR_MS) * HOUR_MS - (ACTIVITY_HOURS - 1) * HOUR_MS;
  const orm = drizzle(db);
  const [rows, [depth]] = await orm.batch([
    orm
      .select({ type: events.type, data: events.data, at_ms: events.atMs })
      .from(events)
      .where(and(eq(events.orgId, orgId), gte(events.atMs, firstHour), inArray(events.type, ["run.created", "run.state"])))
      .orderBy(desc(events.atMs), asc(events.runId), desc(events.seq))
      .limit(config.dashboardActivityEventsMax),
    orm
      .select({ queued: count() })
      .from(runs)
      .where(and(eq(runs.orgId, orgId), eq(runs.state, "queued"))),
  ]);
  const recent: EventRow[] = rows;
  const hourStartMs = Array.from({ length: ACTIVITY_HOURS }, (_, i) => firstHour + i * HOUR_MS);
  const started = hourStartMs.map(() => 0);
  const ended = hourStartMs.map(() => 0);
  for (const event of recent) {
    const hour = hourOf(event.at_ms, firstHour);
    const data = JSON.parse(event.data) as { to?: string; attempt?: number };
    if (data.to === "claimed" && data.attempt === 1) started[hour] += 1;
    if (data.to && (TERMINAL_STATES as readonly string[]).includes(data.to)) ended[hour] += 1;
  }
  const queueDepth = peakDepths(recent, firstHour, depth.queued);
  return { hourStartMs, queueDepth, started, ended, truncated: recent.length >= config.dashboardActivityEventsMax };
}
