/** @jsxImportSource hono/jsx */
// The last day's charts, drawn on the server as SVG, readable without JavaScript: each has a title
// and a description that says in words what it shows.

import type { HourlyActivity } from "./activity";

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
