/** @jsxImportSource hono/jsx */
// The last day's charts, drawn on the server as SVG, readable without JavaScript: each has a title
// and a description that says in words what it shows, labelled axes (the hour in UTC, and what is
// counted), each hour's value on hover (a <title> per hour), and the values as a table under it.

import type { HourlyActivity } from "./activity";

const WIDTH = 300;
const HEIGHT = 120;
/** Room for the value axis's label and numbers on the left, and the hours and their label below. */
const LEFT = 34;
const BOTTOM = 30;
const TOP = 8;
const INK = "#4b5563";

interface Series {
  id: string;
  title: string;
  /** What the value axis counts, for example "runs". */
  unit: string;
  values: number[];
  hours: number[];
  line?: boolean;
}

/** An hour's start as UTC text, for example "14:00Z". */
const hourText = (ms: number) => `${new Date(ms).toISOString().slice(11, 16)}Z`;

/** The axes: the value axis from 0 to the peak with its unit, the time axis from the first hour to now. */
function Axes(props: { series: Series; peak: number; y: (v: number) => number }) {
  const { series, peak, y } = props;
  const base = HEIGHT - BOTTOM;
  const first = series.hours[0];
  return (
    <g class="axes" font-size="10" fill={INK}>
      <line x1={LEFT} x2={LEFT} y1={TOP} y2={base} stroke={INK} />
      <line x1={LEFT} x2={WIDTH - 4} y1={base} y2={base} stroke={INK} />
      {/* An empty day's peak is its 0. */}
      <text x={LEFT - 3} y={base + 3} text-anchor="end" class={peak === 0 ? "y-peak" : "y-zero"}>0</text>
      {peak > 0 && <text x={LEFT - 3} y={y(peak) + 3} text-anchor="end" class="y-peak">{String(peak)}</text>}
      <text x={10} y={(TOP + base) / 2} text-anchor="middle" transform={`rotate(-90 10 ${(TOP + base) / 2})`} class="y-label">{series.unit}</text>
      {first !== undefined && <text x={LEFT} y={base + 12} class="x-first">{hourText(first)}</text>}
      <text x={WIDTH - 4} y={base + 12} text-anchor="end" class="x-now">now</text>
      <text x={(LEFT + WIDTH) / 2} y={HEIGHT - 3} text-anchor="middle" class="x-label">hour (UTC), last 24 hours</text>
    </g>
  );
}

/** Each hour's bar (or step of the line), with its hour and value as a tooltip. */
function Marks(props: { series: Series; y: (v: number) => number; step: number }) {
  const { series, y, step } = props;
  const base = HEIGHT - BOTTOM;
  const label = (i: number) => `${hourText(series.hours[i])}: ${series.values[i]} ${series.unit}`;
  return (
    <g>
      {series.line && (
        <polyline fill="none" stroke="#0b57d0" stroke-width="2" points={series.values.map((v, i) => `${LEFT + i * step},${y(v)} ${LEFT + (i + 1) * step},${y(v)}`).join(" ")} />
      )}
      {series.values.map((v, i) => (
        // A line's hours are hovered over a full-height transparent band; a bar is its own target.
        <rect x={LEFT + i * step + 1} y={series.line ? TOP : y(v)} width={Math.max(1, step - 2)} height={series.line ? base - TOP : base - y(v)} fill={series.line ? "transparent" : "#0b57d0"} data-value={v}>
          <title>{label(i)}</title>
        </rect>
      ))}
    </g>
  );
}

/** The chart's numbers as text: a table of each hour and its value, folded under the chart. */
function Values(props: { series: Series }) {
  const { series } = props;
  return (
    <details class="chart-values">
      <summary>{`${series.title}: each hour's value`}</summary>
      <div class="table-wrap"><table id={`${series.id}-values`}>
        <thead><tr><th scope="col">Hour starting (UTC)</th><th scope="col">{series.unit}</th></tr></thead>
        <tbody>
          {series.values.map((v, i) => <tr><th scope="row">{hourText(series.hours[i])}</th><td>{v}</td></tr>)}
        </tbody>
      </table></div>
    </details>
  );
}

/** A small chart of one hourly series: bars, or a step line for a level such as queue depth. */
export function HourlyChart(props: Series) {
  const { values, hours } = props;
  const peak = Math.max(0, ...values);
  // The scale is at least 1 so an empty day draws flat; the axis names the real peak, 0 when empty.
  const max = Math.max(1, peak);
  const step = (WIDTH - LEFT - 4) / Math.max(1, values.length);
  const y = (v: number) => HEIGHT - BOTTOM - (v / max) * (HEIGHT - BOTTOM - TOP);
  const words = values.map((v, i) => `${hourText(hours[i])} ${v}`).join(", ");
  const total = values.reduce((a, b) => a + b, 0);
  const empty = peak === 0;
  return (
    <figure>
      <svg role="img" aria-labelledby={`${props.id}-title ${props.id}-desc`} width={WIDTH} height={HEIGHT} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} id={props.id}>
        <title id={`${props.id}-title`}>{empty ? `${props.title}: no data for the last day` : `${props.title}, per hour over the last day (peak ${peak}${props.line ? "" : `, total ${total}`})`}</title>
        <desc id={`${props.id}-desc`}>{empty ? "Every hour of the last day is 0." : `Hour starting (UTC) and value: ${words}.`}</desc>
        <Axes series={props} peak={peak} y={y} />
        {empty && <text x={(LEFT + WIDTH) / 2} y={(HEIGHT - BOTTOM) / 2} font-size="11" fill={INK} text-anchor="middle" class="no-data">No data for the last day</text>}
        {!empty && <Marks series={props} y={y} step={step} />}
      </svg>
      <figcaption>{props.title}</figcaption>
      {!empty && <Values series={props} />}
    </figure>
  );
}

export function ActivityCharts(props: { activity: HourlyActivity }) {
  const a = props.activity;
  return (
    <div class="charts">
      <HourlyChart id="chart-depth" title="Queue depth (highest in the hour)" unit="runs queued" values={a.queueDepth} hours={a.hourStartMs} line />
      <HourlyChart id="chart-started" title="Runs started" unit="runs" values={a.started} hours={a.hourStartMs} />
      <HourlyChart id="chart-ended" title="Runs ended" unit="runs" values={a.ended} hours={a.hourStartMs} />
      {a.truncated && <p class="warn">More events than this page reads: the oldest hours are incomplete.</p>}
    </div>
  );
}
