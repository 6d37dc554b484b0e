/** @jsxImportSource hono/jsx */
// The dashboard's pages: each takes the API's own answers (docs/protocol.md) and renders them.

import type { HourlyActivity } from "./activity";
import { ActivityCharts, AttemptTimeline, type Mark } from "./charts";
import { at, cents, Layout, TableWrap } from "./layout";
import { LIVE_EVENTS_SCRIPT } from "./assets";
import { DASH } from "./session";

type Json = Record<string, any>;

export function SignInPage(props: { message?: string; error?: string }) {
  return (
    <Layout title="Sign in">
      <h1>Sign in</h1>
      <p>Sign in with a member token of your organization (it starts <code>dkt_m_</code>).</p>
      {props.message && <p role="status">{props.message}</p>}
      {props.error && <p class="error" role="alert">{props.error}</p>}
      <form method="post" action={`${DASH}/sign-in`}>
        <p>
          <label for="token">Member token</label>
          <br />
          <input id="token" name="token" type="password" autocomplete="off" required size={70} />
        </p>
        <button type="submit">Sign in</button>
      </form>
    </Layout>
  );
}

/** An API refusal, or a page that does not exist (404), inside the dashboard's own frame. */
export function ErrorPage(props: { status: number; error: Json; admin?: boolean }) {
  const notFound = props.status === 404;
  return (
    <Layout title={notFound ? "Not found" : `Error ${props.status}`} signedIn admin={props.admin}>
      <h1>{notFound ? "Not found" : `Error ${props.status}`}</h1>
      <p class="error" role="alert">
        {notFound ? props.error.message : <><code>{props.error.code}</code>: {props.error.message}</>}
      </p>
      <p>
        <a href={DASH}>Back to the queue</a>
      </p>
    </Layout>
  );
}

function Waiting(props: { waiting: Json | null }) {
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

function RunList(props: { runs: Json[]; empty?: string }) {
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

/** A unified diff, each line marked as added, removed, hunk header, file header or context. */
export function Diff(props: { patch: string }) {
  const kind = (line: string) =>
    line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")
      ? "meta"
      : line.startsWith("@@")
        ? "hunk"
        : line.startsWith("+")
          ? "add"
          : line.startsWith("-")
            ? "del"
            : "ctx";
  return (
    <pre class="diff" id="diff" aria-label="Patch"><code>{props.patch.split("\n").map((line) => <span class={kind(line)}>{line || " "}</span>)}</code></pre>
  );
}

function StateTimeline(props: { events: Json[] }) {
  const hops = props.events.filter((e) => e.type === "run.state" || e.type === "run.created");
  return (
    <ol id="states">
      {hops.map((e) => (
        <li>
          {at(e.at_ms)} — {e.type === "run.created" ? <strong>dispatched (queued)</strong> : <><strong>{e.data.to}</strong> <span class="muted">from {e.data.from}: {e.data.reason}</span></>}
        </li>
      ))}
    </ol>
  );
}

function eventLine(e: Json): string {
  const data = e.type === "run.output" ? (e.data.lines as string[]).join(" ⏎ ") : JSON.stringify(e.data);
  return `#${e.seq} ${at(e.at_ms)} ${e.type} ${data}`;
}

function Callback(props: { run: Json; canAct: boolean }) {
  const cb = props.run.callback;
  if (!cb) return <p class="muted">No completion callback (dispatched without a callback_url).</p>;
  return (
    <>
      <TableWrap><table id="callback">
        <tbody>
          <tr><th scope="row">URL</th><td>{cb.url}</td></tr>
          <tr><th scope="row">Status</th><td class="state">{cb.status}</td></tr>
          <tr><th scope="row">Attempts</th><td>{cb.attempts} of {cb.max_attempts}</td></tr>
          <tr><th scope="row">Last attempt</th><td>{at(cb.last_attempt_at_ms)} {cb.last_status_code ? `HTTP ${cb.last_status_code}` : ""} {cb.last_error ?? ""}</td></tr>
          <tr><th scope="row">Delivered</th><td>{at(cb.delivered_at_ms)}</td></tr>
        </tbody>
      </table></TableWrap>
      {props.canAct && props.run.ended_at_ms && (
        <form method="post" action={`${DASH}/runs/${props.run.id}/redeliver`}>
          <button type="submit">Send the callback again</button>
        </form>
      )}
    </>
  );
}

export function RunPage(props: { run: Json; events: Json[]; marks: Mark[][]; nowMs: number; admin: boolean; notice?: string }) {
  const { run, events } = props;
  const ended = run.ended_at_ms !== null;
  const lastSeq = events.length ? events[events.length - 1].seq : 0;
  return (
    <Layout title={`Run ${run.id}`} signedIn admin={props.admin}>
      <h1>Run {run.id}</h1>
      {props.notice && <p role="status">{props.notice}</p>}
      <p>
        State: <span id="run-state" class="state" aria-live="polite">{run.state}</span> · attempt {run.attempt} · dispatched {at(run.created_at_ms)}
        {ended && <> · ended {at(run.ended_at_ms)}</>} · cost <span id="run-cost">{cents(run.cost_cents)}</span>
      </p>
      {run.waiting && <p id="run-waiting">Why it waits: <Waiting waiting={run.waiting} /></p>}
      {run.last_error && <p class="bad">Last error: {run.last_error}</p>}
      {run.recovery_failure && <p class="bad" id="run-recovery-failure">Not reconciled by the recovery of {at(run.recovery_failure.recovery_at_ms)} (passed over after {run.recovery_failure.tries} failed tries): {run.recovery_failure.error}</p>}
      {run.stop_request && <p class="warn">Stop requested {at(run.stop_request.requested_at_ms)} by {run.stop_request.by}{run.stop_request.reason ? `: ${run.stop_request.reason}` : ""}</p>}
      {!ended && (
        <form method="post" action={`${DASH}/runs/${run.id}/cancel`}>
          <label for="cancel-reason">Reason to cancel</label>{" "}
          <input id="cancel-reason" name="reason" type="text" maxlength={500} />{" "}
          <button type="submit" class="danger">Cancel run</button>
        </form>
      )}
      <h2>Brief</h2>
      <p>{run.brief}</p>
      <p class="muted">Needs {run.launch.protocol}{run.labels.length ? ` · labels ${run.labels.join(", ")}` : ""} · command <code>{run.launch.command.join(" ")}</code></p>
      <h2>Attempts</h2>
      <AttemptTimeline run={run} marks={props.marks} nowMs={props.nowMs} />
      {run.steps.length > 0 && <TableWrap><table id="attempts">
        <thead><tr><th scope="col">Attempt</th><th scope="col">Machine</th><th scope="col">Claimed</th><th scope="col">Launched</th><th scope="col">Ended</th><th scope="col">Outcome</th></tr></thead>
        <tbody>
          {run.steps.map((s: Json) => (
            <tr><td>{s.attempt}</td><td>{s.machine_id}</td><td>{at(s.claimed_at_ms)}</td><td>{at(s.launched_at_ms)}</td><td>{at(s.ended_at_ms)}</td><td>{s.outcome ?? "—"}{s.error ? `: ${s.error}` : ""}</td></tr>
          ))}
        </tbody>
      </table></TableWrap>}
      <h2>State timeline</h2>
      <StateTimeline events={events} />
      <h2>Artifact</h2>
      {run.artifact ? (
        run.artifact.empty ? <p>The run finished with an empty patch.</p> : <Diff patch={run.artifact.patch ?? ""} />
      ) : (
        <p class="muted">No artifact yet.</p>
      )}
      <h2>Completion callback</h2>
      {/* Sending a callback again needs the admin role in the API: a member is not offered it. */}
      <Callback run={run} canAct={props.admin} />
      <h2>Events</h2>
      <ol class="events" id="events" data-stream={`${DASH}/runs/${run.id}/events/stream`} data-after={String(lastSeq)} aria-live="polite">
        {events.map((e) => <li>{eventLine(e)}</li>)}
      </ol>
      {!ended && (
        <>
          <noscript><p><a href={`${DASH}/runs/${run.id}`}>Reload</a> to see new events.</p></noscript>
          <script src={LIVE_EVENTS_SCRIPT} />
        </>
      )}
    </Layout>
  );
}

/** A short button (it sits in a narrow column); its accessible name says what it acts on. */
function RevokeButton(props: { action: string; label: string; name: string }) {
  return (
    <form class="inline" method="post" action={props.action}>
      <button type="submit" class="danger" aria-label={`${props.label} ${props.name}`}>{props.label}</button>
    </form>
  );
}

/** `admin`: deregistering needs the admin role in the API, so only an admin is offered the button. */
function RunnerRows(props: { runners: Json[]; nowMs: number; connectedWindowMs: number; admin: boolean }) {
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

/**
 * An admin's resolution of credit held for cost review or reconciliation: the reconciled cost, in
 * cents, and why (docs/protocol.md, "Cost review and reconciliation (admin)", "Run reservations and
 * cost review"). The API checks both, and the admin role.
 */
function ResolveForm(props: { action: string; name: string }) {
  return (
    <form class="inline" method="post" action={props.action}>
      <label>Cost in cents <input type="number" name="cost_cents" min="0" step="1" required /></label>{" "}
      <label>Note <input type="text" name="note" maxlength={1000} required /></label>{" "}
      <button type="submit" aria-label={`Resolve ${props.name}`}>Resolve</button>
    </form>
  );
}

function JobTable(props: { id: string; jobs: Json[]; resolvable?: boolean }) {
  if (props.jobs.length === 0) return <p class="muted">None.</p>;
  return (
    <TableWrap><table id={props.id}>
      <thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Run</th><th scope="col">Reserved</th><th scope="col">Cost</th><th scope="col">Why</th>{props.resolvable && <th scope="col">Resolve</th>}</tr></thead>
      <tbody>
        {props.jobs.map((j) => (
          <tr data-job={j.id}>
            <td>{j.id}</td><td>{j.status}</td>
            <td>{j.run_id ? <a href={`${DASH}/runs/${j.run_id}`}>{j.run_id}</a> : "—"}</td>
            <td>{cents(j.reserved_cents)}</td><td>{cents(j.cost_cents)}</td><td>{j.review_reason ?? j.dispatch?.last_error ?? "—"}</td>
            {props.resolvable && <td><ResolveForm action={`${DASH}/build-jobs/${encodeURIComponent(j.id)}/resolve`} name={j.id} /></td>}
          </tr>
        ))}
      </tbody>
    </table></TableWrap>
  );
}

/** Autopilot runs' model-spend reservations (docs/protocol.md, "Run reservations and cost review"). */
function ReservationTable(props: { id: string; reservations: Json[]; resolvable?: boolean }) {
  if (props.reservations.length === 0) return <p class="muted">None.</p>;
  return (
    <TableWrap><table id={props.id}>
      <thead><tr><th scope="col">Run</th><th scope="col">Project</th><th scope="col">Status</th><th scope="col">Reserved</th><th scope="col">Cost</th><th scope="col">Since</th>{props.resolvable && <th scope="col">Resolve</th>}</tr></thead>
      <tbody>
        {props.reservations.map((r) => (
          <tr data-run={r.run_id}>
            <td><a href={`${DASH}/runs/${r.run_id}`}>{r.run_id}</a></td><td>{r.project_name}</td><td>{r.status}</td>
            <td>{cents(r.reserved_cents)}</td><td>{r.cost_cents === null ? "unknown" : cents(r.cost_cents)}</td><td>{at(r.created_at_ms)}</td>
            {props.resolvable && <td><ResolveForm action={`${DASH}/autopilot/projects/${r.project_id}/reservations/${r.run_id}/resolve`} name={r.run_id} /></td>}
          </tr>
        ))}
      </tbody>
    </table></TableWrap>
  );
}

/**
 * `held`: every build job whose reservation is still held, whatever its status (queued, dispatch
 * unconfirmed, cost review, reconcile), and `reservations`: every autopilot run reservation still
 * held (running, cost review, reconcile), so the Holds rows account for the balance's Held.
 * `review`: the jobs an admin resolves. `admin`: only an admin is offered the resolve forms (the
 * API checks it).
 */
export function CreditsPage(props: { credits: Json; held: Json[]; review: Json[]; paused: Json[]; reservations: Json[]; admin: boolean; notice?: string }) {
  const c = props.credits;
  const runReview = props.reservations.filter((r) => r.status !== "held");
  return (
    <Layout title="Credits" signedIn admin={props.admin}>
      <h1>Credits</h1>
      {props.notice && <p role="status">{props.notice}</p>}
      <TableWrap><table id="balance">
        <tbody>
          <tr><th scope="row">Granted</th><td>{cents(c.granted_cents)}</td></tr>
          <tr><th scope="row">Available</th><td>{cents(c.available_cents)}</td></tr>
          <tr><th scope="row">Held</th><td>{cents(c.held_cents)}</td></tr>
          <tr><th scope="row">Spent</th><td>{cents(c.spent_cents)}</td></tr>
        </tbody>
      </table></TableWrap>
      <h2>Holds: build jobs holding reserved credit</h2>
      <JobTable id="holds" jobs={props.held} />
      <h2>Holds: autopilot runs' model-spend reservations</h2>
      <ReservationTable id="run-holds" reservations={props.reservations} />
      <h2>Cost review and reconciliation</h2>
      {(props.review.length > 0 || runReview.length > 0) && (
        <p class="muted">
          These still hold their reservations. An admin resolves each with its reconciled cost: within the reservation the cost is settled and the rest released;
          a cost above it is charged to available credit, which must cover it.
        </p>
      )}
      <h3>Build jobs</h3>
      <JobTable id="review" jobs={props.review} resolvable={props.admin} />
      <h3>Autopilot runs</h3>
      <ReservationTable id="run-review" reservations={runReview} resolvable={props.admin} />
      <h2>Paused runs (operator holds)</h2>
      <RunList runs={props.paused} empty="No paused runs." />
      <h2>Ledger</h2>
      <TableWrap><table id="ledger">
        <thead><tr><th scope="col">#</th><th scope="col">Kind</th><th scope="col">Amount</th><th scope="col">Job</th><th scope="col">Note</th><th scope="col">By</th><th scope="col">When</th></tr></thead>
        <tbody>
          {(c.entries as Json[]).map((e) => (
            <tr><td>{e.seq}</td><td>{e.kind}</td><td>{cents(e.amount_cents)}</td><td>{e.job_id ?? "—"}</td><td class="note">{e.note ?? "—"}</td><td>{e.actor}</td><td>{at(e.created_at_ms)}</td></tr>
          ))}
        </tbody>
      </table></TableWrap>
    </Layout>
  );
}

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
