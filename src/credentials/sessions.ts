// Dashboard sessions (README.md, "Dashboard"). Signing in with a member token opens a session: its
// random id is the cookie, D1 keeps only the id's SHA-256 hash and the token the session acts as, so
// neither the cookie nor D1 holds anything the API would take as a token. A session works while its
// token works, until DASHBOARD_SESSION_IDLE_MS after its last recorded page view and
// DASHBOARD_SESSION_MAX_MS after sign-in; signing out or revoking the token deletes it.

import { and, desc, eq, inArray, lt, lte, ne, notInArray, or, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Caller } from "../app-types";
import type { Config } from "../config";
import { tokens } from "../db/schema";
import { dashboardSessions as sessions } from "../db/session-schema";
import { randomHex, sha256Hex } from "../lib/crypto";
import { refusalOf, STORED_TOKEN, type StoredToken } from "./tokens";

/** Why a session no longer works: no such session, idle too long, past its absolute limit, or its token stopped working. */
export type SessionEnd = "unknown" | "idle" | "expired" | "token";

export type SessionCheck = { caller: Caller } | { ended: SessionEnd };

interface StoredSession extends StoredToken {
  created_at_ms: number;
  seen_at_ms: number;
}

const SESSION_ID = /^[0-9a-f]{64}$/;

/** The token's columns, read through the session: its role and whether it still works are the token's, never a copy. */
const STORED_SESSION = { created_at_ms: sessions.createdAtMs, seen_at_ms: sessions.seenAtMs, ...STORED_TOKEN };

/**
 * Opens a session for a member `caller` just verified by its token and answers the session id for
 * the cookie. The token's sessions beyond DASHBOARD_SESSIONS_PER_TOKEN_MAX, least recently seen
 * first, end in the same batch, so repeated sign-ins cannot pile up rows.
 */
export async function openSession(db: D1Database, config: Config, caller: Caller, nowMs: number): Promise<string> {
  if (caller.kind !== "member") throw new Error(`a dashboard session acts as a member token, not a ${caller.kind} token`);
  const id = randomHex(32);
  const hash = await sha256Hex(id);
  const orm = drizzle(db);
  const others = and(eq(sessions.tokenId, caller.tokenId), ne(sessions.idHash, hash));
  const kept = orm.select({ idHash: sessions.idHash }).from(sessions).where(others).orderBy(desc(sessions.seenAtMs)).limit(config.dashboardSessionsPerTokenMax - 1);
  await orm.batch([
    orm.insert(sessions).values({ idHash: hash, orgId: caller.orgId, tokenId: caller.tokenId, createdAtMs: nowMs, seenAtMs: nowMs }),
    orm.delete(sessions).where(and(others, notInArray(sessions.idHash, kept))),
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
  const orm = drizzle(db);
  const session = await orm
    .select(STORED_SESSION)
    .from(sessions)
    .innerJoin(tokens, and(eq(tokens.id, sessions.tokenId), eq(tokens.orgId, sessions.orgId)))
    .where(eq(sessions.idHash, hash))
    .get();
  if (!session) return { ended: "unknown" };
  const ended = sessionEnd(session, config, nowMs);
  if (ended) {
    await deleteSession(db, hash);
    return { ended };
  }
  if (nowMs - session.seen_at_ms >= config.dashboardSessionTouchMs) {
    await orm.update(sessions).set({ seenAtMs: nowMs }).where(and(eq(sessions.idHash, hash), lt(sessions.seenAtMs, nowMs)));
  }
  return { caller: { orgId: session.org_id, tokenId: session.id, kind: "member", role: session.role, machineId: null } };
}

/** Signing out: the session is deleted, whatever state it is in. */
export async function closeSession(db: D1Database, id: string): Promise<void> {
  if (SESSION_ID.test(id)) await deleteSession(db, await sha256Hex(id));
}

async function deleteSession(db: D1Database, hash: string): Promise<void> {
  await drizzle(db).delete(sessions).where(eq(sessions.idHash, hash));
}

/**
 * Retention (src/retention.ts): up to a batch of sessions past their idle or absolute expiry, which
 * nobody came back to end. A session whose token expired stops being seen, so it idles out too.
 */
export async function pruneSessions(db: D1Database, config: Config, nowMs: number): Promise<number> {
  const orm = drizzle(db);
  const past = orm
    .select({ rowid: sql`rowid` })
    .from(sessions)
    .where(or(lte(sessions.seenAtMs, nowMs - config.dashboardSessionIdleMs), lte(sessions.createdAtMs, nowMs - config.dashboardSessionMaxMs)))
    .limit(config.pruneBatchMax);
  const result = await orm.delete(sessions).where(inArray(sql`rowid`, past));
  return result.meta.changes;
}
