/** @jsxImportSource hono/jsx */
// The tokens and machines page: the organization's member and registration tokens, and its machines.

import { at, Layout, TableWrap } from "./layout";
import { RevokeButton, RunnerRows } from "./runners-pages";
import { DASH } from "./session";

type Json = Record<string, any>;

/** `tokens` is null for a member without the admin role: listing and revoking tokens is an admin's. */
export function TokensPage(props: { tokens: Json[] | null; runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean; title?: string }) {
  return (
    <Layout title={props.title ?? "Tokens and machines"} signedIn admin={props.admin}>
      <h1>{props.title ?? "Tokens and machines"}</h1>
      <h2>Member and registration tokens</h2>
      {props.tokens === null ? (
        <p id="tokens-for-admins">Tokens are for admins: sign in with an admin member token to list, and revoke, your organization's tokens.</p>
      ) : (
        <TableWrap><table id="tokens">
          <thead><tr><th scope="col">Token</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Action</th></tr></thead>
          <tbody>
            {props.tokens.map((t) => (
              <tr data-token={t.id}>
                <td><a href={`${DASH}/tokens/${t.id}`}>{t.name ?? t.id}</a> <span class="muted">{t.id}</span></td>
                <td>{t.kind}{t.role ? ` (${t.role})` : ""}</td>
                <td class={t.status === "active" ? "ok" : "muted"}>{t.status}</td>
                <td>{at(t.created_at_ms)}</td>
                <td>{t.status === "active" ? <RevokeButton action={`${DASH}/tokens/${t.id}/revoke`} label="Revoke" name={t.name ?? t.id} /> : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table></TableWrap>
      )}
      <h2>Machines</h2>
      {props.runners.length === 0 ? <p class="muted">No machine is registered.</p> : <RunnerRows runners={props.runners} nowMs={props.nowMs} connectedWindowMs={props.connectedWindowMs} admin={props.admin} />}
    </Layout>
  );
}
