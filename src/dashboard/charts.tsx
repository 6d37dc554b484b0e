/** @jsxImportSource hono/jsx */
// Pictures drawn on the server as SVG, readable without JavaScript: each has a title and a
// description that says in words what it shows.

import type { HourlyActivity } from "./activity";
import { at } from "./layout";

type Json = Record<string, any>;

export interface Mark {
  atMs: number;
  kind: "claimed" | "launched" | "report" | "lease" | "stop" | "end";
  label: string;
}

const MARK_COLOURS: Record<Mark["kind"], string> = {
  claimed: "#0b57d0",
  launched: "#116329",
  report: "#4b5563",
  lease: "#7a4a00",
  stop: "#a40e26",
  end: "#1b1f24",
};

/** Each attempt's marks: its claim, launch and end from its step; reports and stop requests from its events; its last lease refresh. */
export function attemptMarks(run: Json, events: Json[], leaseTtlMs: number): Mark[][] {
  return (run.steps as Json[]).map((step) => {
    const marks: Mark[] = [{ atMs: step.claimed_at_ms, kind: "claimed", label: `claimed by ${step.machine_id}` }];
    if (step.launched_at_ms) marks.push({ atMs: step.launched_at_ms, kind: "launched", label: `launched in ${step.sandbox_id ?? "a sandbox"}` });
    for (const e of events) {
      if (e.data?.attempt !== step.attempt) continue;
      if (e.type === "run.phase" || e.type === "run.output" || e.type === "run.artifact") marks.push({ atMs: e.at_ms, kind: "report", label: `report: ${e.type.slice(4)}` });
      if (e.type === "run.stop_requested") marks.push({ atMs: e.at_ms, kind: "stop", label: `stop requested by ${e.data.by}` });
    }
    // Lease refreshes are not events: the current attempt's last one is read back from its lease.
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
    <figcaption>
      {Object.entries(MARK_COLOURS).map(([kind, colour]) => (
        <span class="legend"><svg width="10" height="10" aria-hidden="true"><circle cx="5" cy="5" r="5" fill={colour} /></svg> {kind} </span>
      ))}
    </figcaption>
    </figure>
  );
}

/** A small chart of one hourly series: bars, or a step line for a level such as queue depth. */
export function HourlyChart(props: { id: string; title: string; values: number[]; hours: number[]; line?: boolean }) {
  const { values, hours } = props;
  const width = 264;
  const height = 80;
  const peak = Math.max(0, ...values);
  // The scale is at least 1 so an empty day draws flat; the axis names the real peak, 0 when empty.
  const max = Math.max(1, peak);
  const barWidth = (width - 24) / values.length;
  const y = (v: number) => height - 16 - (v / max) * (height - 28);
  const words = values.map((v, i) => `${new Date(hours[i]).toISOString().slice(11, 16)}Z ${v}`).join(", ");
  const total = values.reduce((a, b) => a + b, 0);
  const empty = peak === 0;
  return (
    <figure>
      <svg role="img" aria-labelledby={`${props.id}-title ${props.id}-desc`} width={width} height={height} viewBox={`0 0 ${width} ${height}`} id={props.id}>
        <title id={`${props.id}-title`}>{empty ? `${props.title}: no data for the last day` : `${props.title}, per hour over the last day (peak ${peak}${props.line ? "" : `, total ${total}`})`}</title>
        <desc id={`${props.id}-desc`}>{empty ? "Every hour of the last day is 0." : `Hour starting (UTC) and value: ${words}.`}</desc>
        <line x1={20} x2={width - 4} y1={height - 16} y2={height - 16} stroke="#4b5563" />
        <text x={0} y={y(peak) + 4} font-size="10" fill="#4b5563" class="y-peak">{String(peak)}</text>
        {empty && <text x={width / 2} y={height / 2} font-size="11" fill="#4b5563" text-anchor="middle" class="no-data">No data for the last day</text>}
        {props.line ? (
          <polyline fill="none" stroke="#0b57d0" stroke-width="2" points={values.map((v, i) => `${20 + i * barWidth},${y(v)} ${20 + (i + 1) * barWidth},${y(v)}`).join(" ")} />
        ) : (
          values.map((v, i) => <rect x={20 + i * barWidth + 1} y={y(v)} width={Math.max(1, barWidth - 2)} height={height - 16 - y(v)} fill="#0b57d0" data-value={v} />)
        )}
        <text x={20} y={height - 3} font-size="10" fill="#4b5563">-24h</text>
        <text x={width - 4} y={height - 3} font-size="10" fill="#4b5563" text-anchor="end">now</text>
      </svg>
      <figcaption>{props.title}</figcaption>
    </figure>
  );
}

export function ActivityCharts(props: { activity: HourlyActivity }) {
  const a = props.activity;
  return (
    <div class="charts">
      <HourlyChart id="chart-depth" title="Queue depth (highest in the hour)" values={a.queueDepth} hours={a.hourStartMs} line />
      <HourlyChart id="chart-started" title="Runs started" values={a.started} hours={a.hourStartMs} />
      <HourlyChart id="chart-ended" title="Runs ended" values={a.ended} hours={a.hourStartMs} />
      {a.truncated && <p class="warn">More events than this page reads: the oldest hours are incomplete.</p>}
    </div>
  );
}
