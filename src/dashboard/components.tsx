/** @jsxImportSource hono/jsx */
// Pieces every page uses: a list that is a table on a wide window and a card per row on a phone,
// and the confirmation box a destroying action is sent with.

import type { Child } from "hono/jsx";

/** One column of a DataTable: its header, and what a row shows in it. */
export interface Column<T> {
  label: string;
  cell: (row: T) => Child;
  /** Classes of the column's cells (for example "state"). */
  class?: string;
}

/**
 * A list of rows: a table on a wide window; on a narrow one (a phone) each row is a card whose
 * cells carry their column's label (data-label, shown by the stylesheet), so no column sits off-screen.
 */
export function DataTable<T>(props: { id?: string; caption?: string; columns: Column<T>[]; rows: T[]; rowAttrs?: (row: T) => Record<string, string> }) {
  return (
    <div class="table-wrap">
      <table id={props.id} class="cards">
        {props.caption && <caption>{props.caption}</caption>}
        <thead><tr>{props.columns.map((c) => <th scope="col">{c.label}</th>)}</tr></thead>
        <tbody>
          {props.rows.map((row) => (
            <tr {...(props.rowAttrs?.(row) ?? {})}>
              {props.columns.map((c) => <td data-label={c.label} class={c.class}>{c.cell(row)}</td>)}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * The box a destroying action's form is sent with: the browser will not send the form unticked, and
 * the route refuses it unticked too (requireConfirmation in route-kit.tsx).
 */
export function ConfirmBox(props: { warning: string }) {
  return (
    <label class="confirm">
      <input type="checkbox" name="confirm" value="yes" required /> {props.warning}
    </label>
  );
}
