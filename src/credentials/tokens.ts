// Member and registration tokens an admin can list and revoke; registration tokens that expire and
// may be limited to a number of registrations (docs/protocol.md, "Organizations and tokens").

import type { Caller } from "../app-types";
import type { tokens } from "../db/schema";
import { DocketError } from "../errors";

export type TokenRow = typeof tokens.$inferSelect;

/** The columns the authentication lookup reads, in D1's own names. */
export interface StoredToken {
  id: string;
  org_id: string;
  kind: Caller["kind"];
  role: Caller["role"];
  machine_id: string | null;
  revoked_at_ms: number | null;
  expires_at_ms: number | null;
  max_uses: number | null;
  uses: number;
}

export type TokenStatus = "active" | "revoked" | "expired" | "used_up";

/** Why an issued token no longer works, as the `reason` of its 401; null while it works. */
export type RefusalReason = "revoked" | "machine_deregistered" | "expired" | "used_up";

export function tokenStatus(t: Pick<StoredToken, "revoked_at_ms" | "expires_at_ms" | "max_uses" | "uses">, nowMs: number): TokenStatus {
  if (t.revoked_at_ms !== null) return "revoked";
  if (t.expires_at_ms !== null && t.expires_at_ms <= nowMs) return "expired";
  if (t.max_uses !== null && t.uses >= t.max_uses) return "used_up";
  return "active";
}

/** The 401 for a token that was issued but no longer works, with the reason it names; null while it works. */
export function refusalOf(t: StoredToken, nowMs: number): DocketError | null {
  const status = tokenStatus(t, nowMs);
  if (status === "active") return null;
  if (status === "revoked" && t.kind === "machine") return machineDeregistered();
  if (status === "revoked") return unauthorized("revoked", "this token was revoked by an admin of its organization");
  if (status === "expired") return unauthorized("expired", `this token expired at ${new Date(t.expires_at_ms!).toISOString()}`);
  return unauthorized("used_up", `this registration token was already used ${t.uses} of ${t.max_uses} times`);
}

/** The 401 of a machine an admin deregistered: its token, or its claim already under way. */
export function machineDeregistered(): DocketError {
  return unauthorized("machine_deregistered", "this machine was deregistered by an admin of its organization; register it again with a new registration token");
}

function unauthorized(reason: RefusalReason, message: string): DocketError {
  return new DocketError("unauthorized", message, { reason });
}

/** A token as GET /v1/tokens shows it: never the token itself, nor its hash. */
export function tokenView(t: TokenRow, nowMs: number) {
  const registration = t.kind === "registration";
  const stored = { revoked_at_ms: t.revokedAtMs, expires_at_ms: t.expiresAtMs, max_uses: t.maxUses, uses: t.uses };
  return {
    id: t.id,
    kind: t.kind,
    role: t.role,
    name: t.name,
    status: tokenStatus(stored, nowMs),
    created_at_ms: t.createdAtMs,
    revoked_at_ms: t.revokedAtMs,
    expires_at_ms: t.expiresAtMs,
    max_uses: registration ? t.maxUses : null,
    uses: registration ? t.uses : null,
  };
}

/**
 * Revokes a member or registration token of `orgId` and answers whether this call revoked it. In the
 * same batch the token's dashboard sessions end (src/credentials/sessions.ts): a revoked token leaves
 * no session that still acts as it.
 */
export async function revokeToken(db: D1Database, orgId: string, tokenId: string, nowMs: number): Promise<boolean> {
  const [revoked] = await db.batch([revokeStatement(db, orgId, tokenId, nowMs), endRevokedTokenSessions(db, orgId, tokenId)]);
  return revoked.meta.changes === 1;
}

/**
 * Revokes a member or registration token of `orgId` in one conditional statement, so that of two
 * admins revoking the last two admin tokens at once only one succeeds: an admin token is revoked
 * only while another active admin token of the organization remains. Already revoked: unchanged.
 */
function revokeStatement(db: D1Database, orgId: string, tokenId: string, nowMs: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE tokens SET revoked_at_ms = ?3
       WHERE id = ?2 AND org_id = ?1 AND kind IN ('member', 'registration') AND revoked_at_ms IS NULL
         AND (role IS NOT 'admin' OR EXISTS (
           SELECT 1 FROM tokens other
           WHERE other.org_id = ?1 AND other.id != ?2 AND other.kind = 'member' AND other.role = 'admin'
             AND other.revoked_at_ms IS NULL AND (other.expires_at_ms IS NULL OR other.expires_at_ms > ?3)))`,
    )
    .bind(orgId, tokenId, nowMs);
}

/** Deletes the sessions of a token once it is revoked; a token the revocation left active keeps them. */
function endRevokedTokenSessions(db: D1Database, orgId: string, tokenId: string): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM dashboard_sessions WHERE org_id = ?1 AND token_id = ?2
         AND EXISTS (SELECT 1 FROM tokens WHERE id = ?2 AND org_id = ?1 AND revoked_at_ms IS NOT NULL)`,
    )
    .bind(orgId, tokenId);
}

/**
 * Takes one registration from a registration token: one conditional UPDATE, so concurrent
 * registrations never take more than `max_uses`. When the token no longer works, throws the 401
 * that says why (it may have expired or been used up since the caller was authenticated).
 */
export async function takeRegistrationUse(db: D1Database, tokenId: string, nowMs: number): Promise<void> {
  const result = await db
    .prepare(
      `UPDATE tokens SET uses = uses + 1
       WHERE id = ? AND kind = 'registration' AND revoked_at_ms IS NULL
         AND (expires_at_ms IS NULL OR expires_at_ms > ?) AND (max_uses IS NULL OR uses < max_uses)`,
    )
    .bind(tokenId, nowMs)
    .run();
  if (result.meta.changes === 1) return;
  const row = await db.prepare(`SELECT ${TOKEN_COLUMNS} FROM tokens WHERE id = ?`).bind(tokenId).first<StoredToken>();
  throw (row && refusalOf(row, nowMs)) || new DocketError("unauthorized", "this registration token no longer works");
}

/** Gives back a use taken by a registration that then failed to be stored. */
export async function returnRegistrationUse(db: D1Database, tokenId: string): Promise<void> {
  await db.prepare("UPDATE tokens SET uses = uses - 1 WHERE id = ? AND uses > 0").bind(tokenId).run();
}

export const TOKEN_COLUMNS = "id, org_id, kind, role, machine_id, revoked_at_ms, expires_at_ms, max_uses, uses";
