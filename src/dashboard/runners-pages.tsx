/** @jsxImportSource hono/jsx */
// The runners and a runner's page.

import { at, Layout, TableWrap } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

/** A short button (it sits in a narrow column); its accessible name says what it acts on. */
export function RevokeButton(props: { action: string; label: string; name: string }) {
  return (
    <form class="inline" method="post" action={props.action}>
      <button type="submit" class="danger" aria-label={`${props.label} ${props.name}`}>{props.label}</button>
    </form>
  );
}

/** `admin`: deregistering needs the admin role in the API, so only an admin is offered the button. */
export function RunnerRows(props: { runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean }) {
  return (
    <TableWrap><table id="runners">
      <thead><tr><th scope="col">Runner</th><th scope="col">Labels</th><th scope="col">Protocols</th><th scope="col">CLI</th><th scope="col">Last seen</th>{props.admin && <th scope="col">Action</th>}</tr></thead>
      <tbody>
        {props.runners.map((r) => {
          const connected = props.nowMs - r.last_seen_at_ms <= props.connectedWindowMs;
          return (
            <tr data-runner={r.id}>
              <td><a href={`${DASH}/runners/${r.id}`}>{r.name}</a> <span class="muted">{r.id}</span></td>
              <td>{r.labels.join(", ") || "—"}</td>
              <td>{r.protocols.join(", ")}</td>
              <td>{r.cli_version}</td>
              <td>{at(r.last_seen_at_ms)} <span class={connected ? "ok" : "muted"}>{connected ? "connected" : "not connected"}</span></td>
              {props.admin && <td><RevokeButton action={`${DASH}/runners/${r.id}/revoke`} label="Deregister" name={r.name} /></td>}
            </tr>
          );
        })}
      </tbody>
    </table></TableWrap>
  );
}

export function RunnersPage(props: { runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean; title?: string }) {
  return (
    <Layout title={props.title ?? "Runners"} signedIn admin={props.admin}>
      <h1>{props.title ?? "Runners"}</h1>
      {props.runners.length === 0 ? <p class="muted">No runner is registered.</p> : <RunnerRows {...props} />}
    </Layout>
  );
}
