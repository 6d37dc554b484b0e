// The scheduler gates of an autopilot project, as pure rules (../shared/spec/run-lifecycle.md,
// "Queue and dispatch": dispatch requires scheduler admission enabled and inside its window,
// available concurrency and any required model-spend authorization). The SchedulerObject keeps the
// state (durable-objects/scheduler-gates.ts) and asks these rules in its serialized claim step.

/**
 * States whose run holds one of its project's slots: execution may be under way. Paused and blocked
 * runs hold none once execution stopped (run-lifecycle.md, "Queue and dispatch").
 */
export const SLOT_STATES: ReadonlySet<string> = new Set(["claimed", "implementing", "pausing", "publishing"]);

export const WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** Days of the week and a start/end "HH:MM" in an IANA time zone; end before start runs overnight. */
export interface DispatchWindow {
  days: Weekday[];
  start: string;
  end: string;
  timeZone: string;
}

/** A project's model-spend budget: per_run_cents is reserved from the org's credit at dispatch. */
export interface ProjectBudget {
  limitCents: number;
  perRunCents: number;
}

export interface ProjectGates {
  enabled: boolean;
  draining: boolean;
  window: DispatchWindow | null;
  /** Runs of the project holding a slot at once; null takes the configured default. */
  concurrency: number | null;
  budget: ProjectBudget | null;
}

/** What the gates are checked against: slots in use and the budget's held and spent cents. */
export interface GateUsage {
  slotsInUse: number;
  heldCents: number;
  spentCents: number;
}

export type GateName = "enabled" | "drain" | "window" | "concurrency" | "budget";

export interface GateVerdict {
  gate: GateName;
  open: boolean;
  reason: string;
}

export const DEFAULT_GATES: ProjectGates = { enabled: true, draining: false, window: null, concurrency: null, budget: null };

/** Minutes since midnight of "HH:MM". */
export function minutesOf(hhmm: string): number {
  const [h, m] = hhmm.split(":").map(Number);
  return h * 60 + m;
}

/** The weekday and minute of the day at `nowMs` in `timeZone` (Intl does the zone's offsets and DST). */
export function localTime(nowMs: number, timeZone: string): { day: Weekday; minute: number } {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).formatToParts(new Date(nowMs));
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? "";
  const day = part("weekday").toLowerCase().slice(0, 3) as Weekday;
  return { day, minute: (Number(part("hour")) % 24) * 60 + Number(part("minute")) };
}

/** Whether `timeZone` is one Intl knows (an IANA name such as Europe/Berlin, or UTC). */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone });
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the window is open at `nowMs`. An overnight window (end before start) opened on a listed
 * day runs on past midnight into the next day until `end`.
 */
export function windowOpen(window: DispatchWindow, nowMs: number): boolean {
  const { day, minute } = localTime(nowMs, window.timeZone);
  const start = minutesOf(window.start);
  const end = minutesOf(window.end);
  const days = new Set(window.days);
  if (start < end) return days.has(day) && minute >= start && minute < end;
  const yesterday = WEEKDAYS[(WEEKDAYS.indexOf(day) + 6) % 7];
  return (days.has(day) && minute >= start) || (days.has(yesterday) && minute < end);
}

const MINUTE_MS = 60_000;

/**
 * The next instant after `nowMs` at which the window may open or close: its next local `start` or
 * `end` minute, on any day (a day the window does not list only finds the verdict unchanged). When the
 * zone's offset changes before that edge (daylight saving time), it answers the first minute of
 * the new offset instead, where the next edge can be found again: never later than the real edge.
 */
export function nextWindowEdgeMs(window: DispatchWindow, nowMs: number): number {
  const fromMs = Math.floor(nowMs / MINUTE_MS) * MINUTE_MS;
  const { minute } = localTime(fromMs, window.timeZone);
  // 1 to 1440 minutes ahead: an edge at this very minute has passed and comes again tomorrow.
  const ahead = Math.min(...[window.start, window.end].map((hhmm) => ((minutesOf(hhmm) - minute + 1439) % 1440) + 1));
  const edgeMs = fromMs + ahead * MINUTE_MS;
  const shifted = (atMs: number) => localTime(atMs, window.timeZone).minute !== (minute + (atMs - fromMs) / MINUTE_MS) % 1440;
  if (!shifted(edgeMs)) return edgeMs;
  // Bounded: the span halves each step, at most 11 steps for a day of minutes.
  let before = fromMs;
  let after = edgeMs;
  while (after - before > MINUTE_MS) {
    const middle = before + Math.floor((after - before) / MINUTE_MS / 2) * MINUTE_MS;
    if (shifted(middle)) after = middle;
    else before = middle;
  }
  return after;
}

function describeWindow(w: DispatchWindow): string {
  return `${w.days.join(",")} ${w.start}-${w.end} ${w.timeZone}`;
}

/**
 * Every gate's verdict for a new dispatch of the project at `nowMs`. `holdsBudget`: the candidate
 * already holds its reservation (a continuation), so the budget does not have to cover it again.
 */
export function gateVerdicts(gates: ProjectGates, usage: GateUsage, nowMs: number, defaultConcurrency: number, holdsBudget = false): GateVerdict[] {
  const limit = gates.concurrency ?? defaultConcurrency;
  const verdicts: GateVerdict[] = [
    gates.enabled ? { gate: "enabled", open: true, reason: "scheduler enabled" } : { gate: "enabled", open: false, reason: "scheduler disabled" },
    gates.draining ? { gate: "drain", open: false, reason: "draining: running work finishes, nothing new starts" } : { gate: "drain", open: true, reason: "not draining" },
    windowVerdict(gates.window, nowMs),
    usage.slotsInUse < limit
      ? { gate: "concurrency", open: true, reason: `${usage.slotsInUse} of ${limit} slots in use` }
      : { gate: "concurrency", open: false, reason: `all ${limit} slots in use` },
    budgetVerdict(gates.budget, usage, holdsBudget),
  ];
  return verdicts;
}

function windowVerdict(window: DispatchWindow | null, nowMs: number): GateVerdict {
  if (!window) return { gate: "window", open: true, reason: "no dispatch window: always" };
  return windowOpen(window, nowMs)
    ? { gate: "window", open: true, reason: `inside the dispatch window ${describeWindow(window)}` }
    : { gate: "window", open: false, reason: `outside the dispatch window ${describeWindow(window)}` };
}

function budgetVerdict(budget: ProjectBudget | null, usage: GateUsage, holdsBudget: boolean): GateVerdict {
  if (!budget) return { gate: "budget", open: true, reason: "no model-spend budget: no reservation required" };
  const left = budget.limitCents - usage.heldCents - usage.spentCents;
  if (holdsBudget) return { gate: "budget", open: true, reason: "the run already holds its reservation" };
  if (left >= budget.perRunCents) return { gate: "budget", open: true, reason: `${left} cents left, ${budget.perRunCents} reserved per run` };
  return { gate: "budget", open: false, reason: `budget exhausted: ${left} cents left, ${budget.perRunCents} needed per run (a reset is explicit: PATCH the scheduler)` };
}

/** The first closed gate's verdict, or null when every gate lets the run start. */
export function firstClosed(verdicts: GateVerdict[]): GateVerdict | null {
  return verdicts.find((v) => !v.open) ?? null;
}

/** Why admission of new tickets is refused: a disabled or draining scheduler (null: admitted as usual). */
export function admissionRefusal(gates: ProjectGates): string | null {
  if (!gates.enabled) return "scheduler disabled";
  if (gates.draining) return "draining";
  return null;
}
