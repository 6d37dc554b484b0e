import { sqliteTable, text, integer, index } from "drizzle-orm/sqlite-core";

// Dashboard sessions (src/credentials/sessions.ts): the cookie holds a random session id, D1 only its
// SHA-256 hash, with the member token the session acts as. The token's role and whether it still
// works are read from `tokens` at each page, never copied here.
export const dashboardSessions = sqliteTable(
  "dashboard_sessions",
  {
    idHash: text("id_hash").primaryKey(),
    orgId: text("org_id").notNull(),
    tokenId: text("token_id").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    // The last page view, written at most once per DASHBOARD_SESSION_TOUCH_MS: idle expiry counts from it.
    seenAtMs: integer("seen_at_ms").notNull(),
  },
  (t) => [index("dashboard_sessions_token").on(t.tokenId, t.seenAtMs), index("dashboard_sessions_seen").on(t.seenAtMs)],
);
