/** @jsxImportSource hono/jsx */
// The dashboard's page frame: navigation, a skip link, and one small stylesheet whose colour pairs
// all keep a contrast of at least 4.5:1 (the browser tests compute it from the rendered colours).

import type { Child } from "hono/jsx";
import { raw } from "hono/html";
import { DASH } from "./session";

const STYLE = `
:root { --fg: #1b1f24; --bg: #ffffff; --muted: #4b5563; --link: #0b57d0; --line: #d0d7de; --panel: #f6f8fa;
  --ok: #116329; --bad: #a40e26; --warn: #7a4a00; --add-bg: #dafbe1; --del-bg: #ffebe9; --hunk: #0550ae; --focus: #0b57d0; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); overflow-wrap: anywhere; }
a { color: var(--link); }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; padding: .5rem 1rem; border-bottom: 1px solid var(--line); background: var(--panel); }
header nav { display: flex; flex-wrap: wrap; gap: .25rem .75rem; }
header nav a { display: inline-block; padding: .25rem 0; } header nav a[aria-current] { font-weight: 700; text-decoration-thickness: 3px; }
main { padding: 1rem; max-width: 90rem; }
h1 { font-size: 1.4rem; margin: .25rem 0 .75rem; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
/* Long ids break anywhere in running text. A table's headers keep their words whole while a cell's
   long ids may break, so a list of runs fits a laptop's window; a table still too wide scrolls inside
   its wrapper, never the page (on a phone a DataTable is cards, below). */
.table-wrap { overflow-x: auto; max-width: 100%; } .scroll-x { overflow-x: auto; max-width: 100%; }
.scroll-x svg.timeline { max-width: none; }
table { border-collapse: collapse; width: 100%; } th, td { overflow-wrap: break-word; text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
td { overflow-wrap: anywhere; } th { background: var(--panel); }
.muted { color: var(--muted); } .ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.state { font-weight: 600; overflow-wrap: normal; }
button, input:not([type=checkbox], [type=radio], [type=hidden]), select, textarea { font: inherit; padding: .3rem .6rem; border: 1px solid var(--muted); border-radius: 4px; color: var(--fg); background: var(--bg); }
button { cursor: pointer; background: var(--panel); }
input, textarea { max-width: 100%; } svg { max-width: 100%; height: auto; }
button.danger { color: var(--bad); border-color: var(--bad); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible, summary:focus-visible, .table-wrap:focus-visible, .scroll-x:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: .5rem; background: var(--bg); padding: .25rem .5rem; }
pre.diff { background: var(--bg); border: 1px solid var(--line); padding: .5rem; overflow-x: auto; font: 13px/1.4 ui-monospace, monospace; }
.diff .add { background: var(--add-bg); display: block; } .diff .del { background: var(--del-bg); display: block; }
.diff .hunk { color: var(--hunk); display: block; } .diff .meta { font-weight: 600; display: block; } .diff .ctx { display: block; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem; } figure { margin: 0; max-width: 100%; } figcaption { color: var(--muted); font-size: .9rem; }
.chart-values table { width: auto; font-size: .9rem; } .chart-values td { text-align: right; }
.error { color: var(--bad); font-weight: 600; }
dt { font-weight: 600; } dd { margin: 0 0 .4rem 1rem; }
ol.events { font: 13px/1.4 ui-monospace, monospace; padding-left: 3rem; max-height: 24rem; overflow-y: auto; }
form.inline { display: inline; }
/* A brief is the dispatcher's text, its lines and indents kept (an issue's Agent Brief is Markdown). */
.brief { white-space: pre-wrap; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
/* A phone: a DataTable (components.tsx) shows each row as a card, each cell its column's label beside
   its value (a value too long for the rest of the line goes on under it); a column without a label
   (the row's actions) shows its buttons alone. Screen readers still hear a table: the header row is
   moved off-screen, not removed. An action's form is a line of its own, each label of a form (with
   its field, or above it) starts a line, and every button is large enough to tap. */
@media (max-width: 40rem) {
  main { padding: .75rem; }
  table.cards thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
  table.cards caption { display: block; text-align: left; font-weight: 600; }
  table.cards tr { border: 1px solid var(--line); border-radius: 6px; margin-bottom: .75rem; padding: .4rem .6rem; background: var(--bg); }
  table.cards td { border: none; padding: .2rem 0; }
  table.cards td::before { content: attr(data-label); display: inline-block; min-width: 7.5rem; margin-right: .5rem; font-weight: 600; color: var(--muted); }
  table.cards td[data-label=""]::before { content: none; }
  table.cards td:first-child { font-weight: 600; }
  main form.inline { display: block; margin: .5rem 0; }
  main label { display: block; margin: .35rem 0; }
  header button, main button { min-height: 2.75rem; }
}
`;

/** The navigation's sections, in order: each with its path under the dashboard and its link text. */
const SECTIONS = [
  { key: "queue", path: "", text: "Queue" },
  { key: "runs", path: "/runs", text: "Runs" },
  { key: "runners", path: "/runners", text: "Runners" },
  { key: "autopilot", path: "/autopilot", text: "Autopilot" },
  { key: "managed", path: "/managed", text: "Managed runners" },
  { key: "credits", path: "/credits", text: "Credits" },
  { key: "tokens", path: "/tokens", text: "Tokens", adminOnly: true },
] as const;

export type Section = (typeof SECTIONS)[number]["key"];

/**
 * `admin`: the signed-in member has the admin role, so the navigation offers the token list.
 * `section`: the navigation's link for it is marked as where the reader is (aria-current `page` on
 * the section's own page, `true` on a page within it, `subpage`).
 */
export function Layout(props: { title: string; signedIn?: boolean; admin?: boolean; section?: Section; subpage?: boolean; children?: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Docket`}</title>
        {/* An empty icon, so the browser does not ask for /favicon.ico (a 404 on every page). */}
        <link rel="icon" href="data:," />
        <style>{raw(STYLE)}</style>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header>
          <strong>Docket</strong>
          {props.signedIn && (
            <nav aria-label="Dashboard">
              {SECTIONS.filter((s) => props.admin || !("adminOnly" in s)).map((s) => (
                <a href={`${DASH}${s.path}`} aria-current={s.key === props.section ? (props.subpage ? "true" : "page") : undefined}>
                  {s.text}
                </a>
              ))}
            </nav>
          )}
          {props.signedIn && (
            <form class="inline" method="post" action={`${DASH}/sign-out`}>
              <button type="submit">Sign out</button>
            </form>
          )}
        </header>
        <main id="main">{props.children}</main>
      </body>
    </html>
  );
}

/** A table that scrolls sideways inside its own box when the window is narrower than it. */
export function TableWrap(props: { children?: Child }) {
  return <div class="table-wrap">{props.children}</div>;
}

/** A time as UTC text, or a dash. */
export function at(ms: number | null | undefined): string {
  return typeof ms === "number" ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "—";
}

export function cents(value: number | null | undefined): string {
  return typeof value === "number" ? `$${(value / 100).toFixed(2)}` : "—";
}
