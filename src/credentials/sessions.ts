// Dashboard sessions (README.md, "Dashboard"). Signing in with a member token opens a session: its
// random id is the cookie, D1 keeps only the id's SHA-256 hash and the token the session acts as, so
// neither the cookie nor D1 holds anything the API would take as a token. A session works while its
// token works, until DASHBOARD_SESSION_IDLE_MS after its last recorded page view and
// DASHBOARD_SESSION_MAX_MS after sign-in; signing out or revoking the token deletes it.

import type { Caller } from "../app-types";
import type { Config } from "../config";
import { randomHex, sha256Hex } from "../lib/crypto";
import { refusalOf, TOKEN_COLUMNS, type StoredToken } from "./tokens";

/** Why a session no longer works: no such session, idle too long, past its absolute limit, or its token stopped working. */
export type SessionEnd = "unknown" | "idle" | "expired" | "token";

export type SessionCheck = { caller: Caller } | { ended: SessionEnd };

interface StoredSession extends StoredToken {
  created_at_ms: number;
  seen_at_ms: number;
}

const SESSION_ID = /^[0-9a-f]{64}$/;

/** The token's columns, read through the session: its role and whether it still works are the token's, never a copy. */
const SESSION_SQL = `SELECT s.created_at_ms, s.seen_at_ms, ${TOKEN_COLUMNS.split(", ").map((column) => `t.${column}`).join(", ")}
  FROM dashboard_sessions s JOIN tokens t ON t.id = s.token_id AND t.org_id = s.org_id
  WHERE s.id_hash = ?`;

/**
 * Opens a session for a member `caller` just verified by its token and answers the session id for
 * the cookie. The token's sessions beyond DASHBOARD_SESSIONS_PER_TOKEN_MAX, least recently seen
 * first, end in the same batch, so repeated sign-ins cannot pile up rows.
 */
export async function openSession(db: D1Database, config: Config, caller: Caller, nowMs: number): Promise<string> {
  if (caller.kind !== "member") throw new Error(`a dashboard session acts as a member token, not a ${caller.kind} token`);
  const id = randomHex(32);
  const hash = await sha256Hex(id);
  await db.batch([
    db
      .prepare("INSERT INTO dashboard_sessions (id_hash, org_id, token_id, created_at_ms, seen_at_ms) VALUES (?, ?, ?, ?, ?)")
      .bind(hash, caller.orgId, caller.tokenId, nowMs, nowMs),
    db
      .prepare(
        `DELETE FROM dashboard_sessions WHERE token_id = ?1 AND id_hash != ?2 AND id_hash NOT IN (
           SELECT id_hash FROM dashboard_sessions WHERE token_id = ?1 AND id_hash != ?2 ORDER BY seen_at_ms DESC LIMIT ?3)`,
      )
      .bind(caller.tokenId, hash, config.dashboardSessionsPerTokenMax - 1),
  ]);
  return id;
}

/** Why a stored session no longer works at `nowMs`, or null while it does. */
export function sessionEnd(session: StoredSession, config: Config, nowMs: number): SessionEnd | null {
  if (refusalOf(session, nowMs) || session.kind !== "member") return "token";
  if (nowMs - session.created_at_ms >= config.dashboardSessionMaxMs) return "expired";
  if (nowMs - session.seen_at_ms >= config.dashboardSessionIdleMs) return "idle";
  return null;
}

/**
 * The member a session acts as, or why it ended (an ended session is deleted). A page view slides the
 * idle expiry, but writes D1 only when the last record is DASHBOARD_SESSION_TOUCH_MS old or more.
 */
export async function checkSession(db: D1Database, config: Config, id: string, nowMs: number): Promise<SessionCheck> {
  if (!SESSION_ID.test(id)) return { ended: "unknown" };
  const hash = await sha256Hex(id);
  const session = await db.prepare(SESSION_SQL).bind(hash).first<StoredSession>();
  if (!session) return { ended: "unknown" };
  const ended = sessionEnd(session, config, nowMs);
  if (ended) {
    await deleteSession(db, hash);
    return { ended };
  }
  if (nowMs - session.seen_at_ms >= config.dashboardSessionTouchMs) {
    await db.prepare("UPDATE dashboard_sessions SET seen_at_ms = ? WHERE id_hash = ? AND seen_at_ms < ?").bind(nowMs, hash, nowMs).run();
  }
  return { caller: { orgId: session.org_id, tokenId: session.id, kind: "member", role: session.role, machineId: null } };
}

/** Signing out: the session is deleted, whatever state it is in. */
export async function closeSession(db: D1Database, id: string): Promise<void> {
  if (SESSION_ID.test(id)) await deleteSession(db, await sha256Hex(id));
}

async function deleteSession(db: D1Database, hash: string): Promise<void> {
  await db.prepare("DELETE FROM dashboard_sessions WHERE id_hash = ?").bind(hash).run();
}

/**
 * Retention (src/retention.ts): up to a batch of sessions past their idle or absolute expiry, which
 * nobody came back to end. A session whose token expired stops being seen, so it idles out too.
 */
export async function pruneSessions(db: D1Database, config: Config, nowMs: number): Promise<number> {
  const result = await db
    .prepare(
      `DELETE FROM dashboard_sessions WHERE rowid IN (
         SELECT rowid FROM dashboard_sessions WHERE seen_at_ms <= ?1 OR created_at_ms <= ?2 LIMIT ?3)`,
    )
    .bind(nowMs - config.dashboardSessionIdleMs, nowMs - config.dashboardSessionMaxMs, config.pruneBatchMax)
    .run();
  return result.meta.changes;
}
