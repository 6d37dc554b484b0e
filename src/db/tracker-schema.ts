import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

// Tracker deliveries (docs/protocol.md, "Tracker deliveries"): one receipt per run and kind
// (blocker_comment, review_label, pr_comment, failure_comment), pending until the tracker confirmed it (delivered)
// or its tries ran out (failed). The request itself is kept, so a retry needs nothing else.

export const trackerDeliveries = sqliteTable(
  "tracker_deliveries",
  {
    runId: text("run_id").notNull(),
    kind: text("kind", { enum: ["blocker_comment", "review_label", "pr_comment", "failure_comment"] }).notNull(),
    orgId: text("org_id").notNull(),
    projectId: text("project_id").notNull(),
    ticketKey: text("ticket_key").notNull(),
    request: text("request").notNull(), // JSON: the event's data (body, pr_url, …)
    status: text("status", { enum: ["pending", "delivered", "failed"] }).notNull(),
    tries: integer("tries").notNull(),
    lastError: text("last_error"),
    receipt: text("receipt"), // JSON: { comment_id, url } of a comment; null for labels and before delivery
    createdAtMs: integer("created_at_ms").notNull(),
    lastTryAtMs: integer("last_try_at_ms"),
    deliveredAtMs: integer("delivered_at_ms"),
  },
  // By status alone too: the cron's delivery sweep reads the pending ones of every organization.
  (t) => [primaryKey({ columns: [t.runId, t.kind] }), index("tracker_deliveries_org_status").on(t.orgId, t.status), index("tracker_deliveries_status").on(t.status)],
);
