/** @jsxImportSource hono/jsx */
// The queue and the runs list: each takes the API's own answers (docs/protocol.md) and renders them.

import type { HourlyActivity } from "./activity";
import { ActivityCharts } from "./charts";
import { at, Layout, TableWrap } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

export function Waiting(props: { waiting: Json | null }) {
  if (!props.waiting) return <span class="muted">—</span>;
  return (
    <span class="waiting" data-reason={props.waiting.reason}>
      <strong>{props.waiting.reason.replaceAll("_", " ")}</strong>: {props.waiting.detail.message}
    </span>
  );
}

export function QueuePage(props: { queue: Json; recent: Json[]; activity: HourlyActivity; admin: boolean }) {
  return (
    <Layout title="Queue" signedIn admin={props.admin}>
      <h1>Queue</h1>
      <ActivityCharts activity={props.activity} />
      <h2>Queued runs, in dispatch order</h2>
      {props.queue.runs.length === 0 ? (
        <p class="muted">Nothing is queued.</p>
      ) : (
        <TableWrap><table id="queue">
          <thead>
            <tr><th scope="col">#</th><th scope="col">Run</th><th scope="col">Needs</th><th scope="col">Priority</th><th scope="col">Queued</th><th scope="col">Why it waits</th></tr>
          </thead>
          <tbody>
            {props.queue.runs.map((r: Json, i: number) => (
              <tr data-run={r.id}>
                <td>{i + 1}</td>
                <td><a href={`${DASH}/runs/${r.id}`}>{r.id}</a></td>
                <td>{r.protocol}{r.labels.length > 0 ? ` · ${r.labels.join(", ")}` : ""}</td>
                <td>{r.priority}</td>
                <td>{at(r.queued_at_ms)}</td>
                <td><Waiting waiting={r.waiting} /></td>
              </tr>
            ))}
          </tbody>
        </table></TableWrap>
      )}
      {props.queue.truncated && <p class="muted">More runs are queued than this page lists.</p>}
      <h2>Recent runs</h2>
      <RunList runs={props.recent} />
    </Layout>
  );
}

export function RunList(props: { runs: Json[]; empty?: string }) {
  if (props.runs.length === 0) return <p class="muted">{props.empty ?? "No runs yet."}</p>;
  return (
    <TableWrap><table>
      <thead><tr><th scope="col">Run</th><th scope="col">State</th><th scope="col">Attempt</th><th scope="col">Dispatched</th></tr></thead>
      <tbody>
        {props.runs.map((r) => (
          <tr data-run={r.id}>
            <td><a href={`${DASH}/runs/${r.id}`}>{r.id}</a></td>
            <td class="state">{r.state}</td>
            <td>{r.attempt}</td>
            <td>{at(r.created_at_ms)}</td>
          </tr>
        ))}
      </tbody>
    </table></TableWrap>
  );
}

export function RunsPage(props: { runs: Json[]; admin: boolean }) {
  return (
    <Layout title="Runs" signedIn admin={props.admin}>
      <h1>Runs</h1>
      <RunList runs={props.runs} />
    </Layout>
  );
}
