/** @jsxImportSource hono/jsx */
// The tokens and machines page: the organization's member and registration tokens (listed, minted,
// renamed and revoked by an admin through /v1/tokens), a token's own page, the page that shows a new
// token's secret its one time, and the organization's machines.

import { ConfirmBox, DataTable, type Column } from "./components";
import { at, Layout } from "./layout";
import { RunnerRows } from "./runners-pages";
import { DASH } from "./session";
import { MintForms } from "./tokens-forms";

type Json = Record<string, any>;

const tokenName = (t: Json): string => t.name ?? t.id;
const tokenAction = (t: Json, what: string) => `${DASH}/tokens/${t.id}/${what}`;

/** A registration token's uses of its limit; member tokens count none. */
function uses(t: Json): string {
  if (t.kind !== "registration") return "—";
  return `${t.uses} of ${t.max_uses ?? "unlimited"}`;
}

/** Revoking: refused from then on, so the form is sent only with its box ticked (the route checks it too). */
function RevokeForm(props: { token: Json }) {
  const name = tokenName(props.token);
  return (
    <form class="inline" method="post" action={tokenAction(props.token, "revoke")}>
      <ConfirmBox warning={`refuse every call with ${name} from now on`} />{" "}
      <button type="submit" class="danger" aria-label={`Revoke ${name}`}>Revoke</button>
    </form>
  );
}

function RenameForm(props: { token: Json }) {
  return (
    <form method="post" action={tokenAction(props.token, "rename")}>
      <label>New name <input type="text" name="name" value={props.token.name ?? ""} maxlength={100} required /></label>{" "}
      <button type="submit" aria-label={`Rename ${tokenName(props.token)}`}>Rename</button>
    </form>
  );
}

const TOKEN_COLUMNS: Column<Json>[] = [
  { label: "Token", cell: (t) => <><a href={`${DASH}/tokens/${t.id}`}>{tokenName(t)}</a> <span class="muted">{t.id}</span></> },
  { label: "Kind", cell: (t) => t.kind },
  { label: "Role", cell: (t) => t.role ?? "—" },
  { label: "Status", cell: (t) => <span class={t.status === "active" ? "ok" : "muted"}>{t.status}</span>, class: "state" },
  { label: "Expires", cell: (t) => (t.expires_at_ms === null ? "never" : at(t.expires_at_ms)) },
  { label: "Uses", cell: uses },
  { label: "Created", cell: (t) => at(t.created_at_ms) },
  { label: "Revoked", cell: (t) => at(t.revoked_at_ms) },
  { label: "Action", cell: (t) => (t.status === "active" ? <RevokeForm token={t} /> : "—") },
];

export function TokenTable(props: { tokens: Json[] }) {
  if (props.tokens.length === 0) return <p class="muted">No member or registration token.</p>;
  return <DataTable id="tokens" columns={TOKEN_COLUMNS} rows={props.tokens} rowAttrs={(t) => ({ "data-token": t.id })} />;
}

/** `tokens` is null for a member without the admin role: listing, minting and revoking tokens is an admin's. */
export function TokensPage(props: { tokens: Json[] | null; runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean; registrationTtlMs: number; notice?: string }) {
  return (
    <Layout title="Tokens and machines" signedIn admin={props.admin} section="tokens">
      <h1>Tokens and machines</h1>
      {props.notice && <p class="ok" role="status">{props.notice}</p>}
      <h2>Member and registration tokens</h2>
      {props.tokens === null ? (
        <p id="tokens-for-admins">Tokens are for admins: sign in with an admin member token to list, mint and revoke your organization's tokens.</p>
      ) : (
        <>
          <TokenTable tokens={props.tokens} />
          <MintForms registrationTtlMs={props.registrationTtlMs} />
        </>
      )}
      <h2>Machines</h2>
      {props.runners.length === 0 ? <p class="muted">No machine is registered.</p> : <RunnerRows runners={props.runners} nowMs={props.nowMs} connectedWindowMs={props.connectedWindowMs} admin={props.admin} />}
    </Layout>
  );
}

/** One token's page: what the list shows, and renaming and revoking it. */
export function TokenPage(props: { token: Json; admin: boolean; notice?: string }) {
  const { token } = props;
  return (
    <Layout title={`Token ${tokenName(token)}`} signedIn admin={props.admin} section="tokens" subpage>
      <h1>Token {tokenName(token)}</h1>
      {props.notice && <p class="ok" role="status">{props.notice}</p>}
      <TokenTable tokens={[token]} />
      <h2>Rename</h2>
      <RenameForm token={token} />
      <p><a href={`${DASH}/tokens`}>All tokens</a></p>
    </Layout>
  );
}

/** How the new token is used, in one line; `origin` is this Docket's, as the browser reached it. */
function UseIt(props: { token: Json; origin: string }) {
  if (props.token.kind === "member") {
    return <p>Sign in to this dashboard with it, or send it to the API as <code>Authorization: Bearer …</code>.</p>;
  }
  return <p>Register a machine with it: <code>docket-runner register --server {props.origin} --token …</code></p>;
}

/**
 * The answer to minting: the token's secret, shown this once (the API keeps only its hash). It is in
 * this page alone, never in a URL, and the route sends it with Cache-Control: no-store.
 */
export function MintedTokenPage(props: { token: Json; origin: string; admin: boolean }) {
  const { token } = props;
  return (
    <Layout title="Token minted" signedIn admin={props.admin} section="tokens" subpage>
      <h1>Token minted: {tokenName(token)}</h1>
      <p class="warn" role="alert" id="copy-it-now">
        Copy it now: this is the only time Docket shows this token. Only its hash is kept, so it cannot be shown again; a lost token is revoked and
        another minted.
      </p>
      <p>
        <label>
          The new {token.kind} token <input id="minted-token" type="text" readonly value={token.token} size={70} autocomplete="off" spellcheck={false} />
        </label>
      </p>
      <UseIt token={token} origin={props.origin} />
      <TokenTable tokens={[token]} />
      <p><a href={`${DASH}/tokens`}>Back to the tokens</a> (the list never shows a token's secret)</p>
    </Layout>
  );
}
