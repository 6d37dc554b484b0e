/** @jsxImportSource hono/jsx */
// A run's attempts as an SVG timeline drawn on the server from the run's record, readable without
// JavaScript: it has a title and a description that says in words what it shows.

import { at } from "./layout";

type Json = Record<string, any>;

export interface Mark {
  atMs: number;
  kind: "claimed" | "launched" | "state" | "report" | "lease" | "stop" | "end";
  label: string;
}

const MARK_COLOURS: Record<Mark["kind"], string> = {
  claimed: "#0b57d0",
  launched: "#116329",
  state: "#6639ba",
  report: "#4b5563",
  lease: "#7a4a00",
  stop: "#a40e26",
  end: "#1b1f24",
};

/** Changes of state inside an attempt that its claim, launch and end marks do not already show. */
const INNER_STATES = new Set(["pausing", "publishing"]);

/**
 * Each attempt's marks, all from the run's own record (never from a page of its events): its claim,
 * launch and end from its step; its pause or publication from the state history; the run's stop
 * request and last report where they fall in it; the current attempt's last lease refresh.
 */
export function attemptMarks(run: Json, leaseTtlMs: number): Mark[][] {
  return (run.steps as Json[]).map((step) => {
    const marks: Mark[] = [{ atMs: step.claimed_at_ms, kind: "claimed", label: `claimed by ${step.machine_id}` }];
    if (step.launched_at_ms) marks.push({ atMs: step.launched_at_ms, kind: "launched", label: `launched in ${step.sandbox_id ?? "a sandbox"}` });
    for (const h of (run.state_history ?? []) as Json[]) {
      if (h.attempt === step.attempt && INNER_STATES.has(h.to)) marks.push({ atMs: h.at_ms, kind: "state", label: `${h.to}: ${h.reason}` });
    }
    const within = (ms: number | null | undefined): ms is number => typeof ms === "number" && ms >= step.claimed_at_ms && (step.ended_at_ms === null || ms <= step.ended_at_ms);
    if (within(run.last_report_at_ms)) marks.push({ atMs: run.last_report_at_ms, kind: "report", label: "last report" });
    if (within(run.stop_request?.requested_at_ms)) marks.push({ atMs: run.stop_request.requested_at_ms, kind: "stop", label: `stop requested by ${run.stop_request.by}` });
    // Lease refreshes are not kept: the current attempt's last one is read back from its lease.
    if (step.attempt === run.attempt && run.lease_expires_at_ms && step.ended_at_ms === null) {
      marks.push({ atMs: run.lease_expires_at_ms - leaseTtlMs, kind: "lease", label: `lease refreshed, lapses ${at(run.lease_expires_at_ms)}` });
    }
    if (step.ended_at_ms) marks.push({ atMs: step.ended_at_ms, kind: "end", label: `ended: ${step.outcome ?? "?"}${step.error ? ` (${step.error})` : ""}` });
    return marks.sort((a, b) => a.atMs - b.atMs);
  });
}

export function AttemptTimeline(props: { run: Json; marks: Mark[][]; nowMs: number }) {
  const { run, marks } = props;
  if (marks.length === 0) return <p class="muted">No attempts yet: no runner has claimed this run.</p>;
  const start = run.created_at_ms as number;
  const end = Math.max(run.ended_at_ms ?? props.nowMs, ...marks.flat().map((m) => m.atMs), start + 1);
  const width = 640;
  const left = 90;
  const rowHeight = 28;
  const height = marks.length * rowHeight + 24;
  const x = (ms: number) => left + ((ms - start) / (end - start)) * (width - left - 12);
  const summary = marks
    .map((row, i) => `Attempt ${i + 1}: ${row.map((m) => `${m.label} at ${at(m.atMs)}`).join("; ")}.`)
    .join(" ");
  return (
    <figure>
    {/* On a phone the timeline keeps its size and scrolls sideways in its own box (layout.tsx, .scroll-x): scaled down to the window, its words would be too small to read. */}
    <div class="scroll-x" tabindex={0} role="region" aria-label="Attempt timeline">
    <svg role="img" aria-labelledby="timeline-title timeline-desc" width={width} height={height} viewBox={`0 0 ${width} ${height}`} class="timeline">
      <title id="timeline-title">{`Attempts of run ${run.id}, from dispatch (${at(start)}) to ${run.ended_at_ms ? "its end" : "now"} (${at(end)})`}</title>
      <desc id="timeline-desc">{summary}</desc>
      {marks.map((row, i) => {
        const y = 16 + i * rowHeight;
        const first = row[0]?.atMs ?? start;
        const last = row[row.length - 1]?.atMs ?? first;
        return (
          <g data-attempt={i + 1}>
            <text x={4} y={y + 4} font-size="12" fill="#1b1f24">{`attempt ${i + 1}`}</text>
            <line x1={x(first)} x2={x(last)} y1={y} y2={y} stroke="#4b5563" stroke-width="2" />
            {row.map((m) => (
              <circle cx={x(m.atMs)} cy={y} r={m.kind === "report" ? 3 : 6} fill={MARK_COLOURS[m.kind]} data-kind={m.kind}>
                <title>{`${m.label} at ${at(m.atMs)}`}</title>
              </circle>
            ))}
          </g>
        );
      })}
      <text x={left} y={height - 4} font-size="11" fill="#4b5563">{at(start)}</text>
      <text x={width - 12} y={height - 4} font-size="11" fill="#4b5563" text-anchor="end">{at(end)}</text>
    </svg>
    </div>
    <figcaption>
      {Object.entries(MARK_COLOURS).map(([kind, colour]) => (
        <span class="legend"><svg width="10" height="10" aria-hidden="true"><circle cx="5" cy="5" r="5" fill={colour} /></svg> {kind} </span>
      ))}
    </figcaption>
    </figure>
  );
}
