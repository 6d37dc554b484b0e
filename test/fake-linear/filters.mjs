// Linear's filter inputs (IssueFilter, TeamFilter, …) evaluated against the stand-in's model, and
// its cursor pagination (first/after, last/before; at most 250 a page, 50 unless asked), as
// https://linear.app/developers/filtering and /pagination describe them.

const MAX_PAGE = 250;
const DEFAULT_PAGE = 50;

/** Whether `value` satisfies one comparator object ({eq, in, gt, eqIgnoreCase, …}); every key must hold. */
export function compare(value, comparator) {
  return Object.entries(comparator).every(([op, want]) => {
    switch (op) {
      case "eq": return value === want || (value instanceof Date && value.getTime() === asTime(want));
      case "neq": return value !== want;
      case "in": return want.includes(value);
      case "nin": return !want.includes(value);
      case "eqIgnoreCase": return typeof value === "string" && value.toLowerCase() === want.toLowerCase();
      case "neqIgnoreCase": return typeof value !== "string" || value.toLowerCase() !== want.toLowerCase();
      case "contains": return typeof value === "string" && value.includes(want);
      case "containsIgnoreCase": return typeof value === "string" && value.toLowerCase().includes(want.toLowerCase());
      case "notContains": return typeof value !== "string" || !value.includes(want);
      case "startsWith": return typeof value === "string" && value.startsWith(want);
      case "endsWith": return typeof value === "string" && value.endsWith(want);
      case "gt": return ordinal(value) > asTime(want, value);
      case "gte": return ordinal(value) >= asTime(want, value);
      case "lt": return ordinal(value) < asTime(want, value);
      case "lte": return ordinal(value) <= asTime(want, value);
      default: throw new Error(`the stand-in does not evaluate comparator ${op}`);
    }
  });
}

const ordinal = (v) => (v instanceof Date ? v.getTime() : v);
/** A date comparator's operand (an ISO time, or a number compared as is). */
const asTime = (want, value) => (typeof want === "string" && (value === undefined || value instanceof Date) ? Date.parse(want) : want);

/**
 * Whether `node` matches `filter`: `fields` maps each filter key to how it is judged, either a
 * getter whose value is compared, or a function (node, sub-filter) => boolean for a nested filter.
 */
export function matches(node, filter, fields) {
  if (!filter) return true;
  return Object.entries(filter).every(([key, sub]) => {
    if (sub === null || sub === undefined) return true;
    if (key === "and") return sub.every((f) => matches(node, f, fields));
    if (key === "or") return sub.some((f) => matches(node, f, fields));
    const field = fields[key];
    if (!field) throw new Error(`the stand-in does not evaluate filter field ${key}`);
    return field.nested ? field.nested(node, sub) : compare(field(node), sub);
  });
}

/** A connection of `nodes` (already in order, each with an `id`): `{nodes, pageInfo}` for first/after or last/before. */
export function page(nodes, { first, after, last, before } = {}) {
  let start = 0;
  let end = nodes.length;
  if (after) start = indexAfter(nodes, after);
  if (before) end = Math.max(start, nodes.findIndex((n) => n.id === before));
  const size = Math.min(first ?? last ?? DEFAULT_PAGE, MAX_PAGE);
  if (size < 0) throw new Error("Argument first/last must be a non-negative integer");
  const from = last !== undefined && last !== null && first == null ? Math.max(start, end - size) : start;
  const to = Math.min(end, from + size);
  const slice = nodes.slice(from, to);
  return {
    nodes: slice,
    pageInfo: { startCursor: slice[0]?.id ?? null, endCursor: slice.at(-1)?.id ?? null, hasNextPage: to < nodes.length, hasPreviousPage: from > 0 },
  };
}

function indexAfter(nodes, cursor) {
  const at = nodes.findIndex((n) => n.id === cursor);
  if (at < 0) throw new Error(`cursor ${cursor} names no node of this connection`);
  return at + 1;
}
