// Member and registration tokens an admin can list and revoke; registration tokens that expire and
// may be limited to a number of registrations (docs/protocol.md, "Organizations and tokens").

import { and, eq, exists, gt, inArray, isNotNull, isNull, lt, ne, or, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { alias } from "drizzle-orm/sqlite-core";
import type { Caller } from "../app-types";
import { dashboardSessions } from "../db/session-schema";
import { tokens } from "../db/schema";
import { DocketError } from "../errors";
import { newId, newToken, sha256Hex } from "../lib/crypto";

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

/** StoredToken as a drizzle selection: the same names, so a join can read it beside other columns. */
export const STORED_TOKEN = {
  id: tokens.id,
  org_id: tokens.orgId,
  kind: tokens.kind,
  role: tokens.role,
  machine_id: tokens.machineId,
  revoked_at_ms: tokens.revokedAtMs,
  expires_at_ms: tokens.expiresAtMs,
  max_uses: tokens.maxUses,
  uses: tokens.uses,
};

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

export interface TokenLimits {
  createdAtMs: number;
  expiresAtMs: number | null;
  maxUses: number | null;
}

/** A new token's row and the answer that shows it (the token itself, which is never shown again). */
export async function mintToken(
  orgId: string,
  kind: "member" | "registration",
  role: "admin" | "member" | null,
  name: string | null,
  limits: TokenLimits = { createdAtMs: Date.now(), expiresAtMs: null, maxUses: null },
) {
  const token = newToken(kind);
  const row = { id: newId("tok"), orgId, kind, role, name, tokenHash: await sha256Hex(token), machineId: null, ...limits };
  // The token as GET /v1/tokens lists it, plus the token itself.
  const answer = { ...tokenView({ ...row, revokedAtMs: null, uses: 0 } as TokenRow, row.createdAtMs), token };
  return { row, answer };
}

/**
 * Creates a member or registration token: POST /v1/tokens, and a managed runner pool's slot
 * (src/managed/slots.ts), whose registration token is listed and revoked as any other.
 */
export async function createToken(db: D1Database, orgId: string, kind: "member" | "registration", role: "admin" | "member" | null, name: string | null, limits: TokenLimits) {
  const { row, answer } = await mintToken(orgId, kind, role, name, limits);
  await drizzle(db).insert(tokens).values(row);
  return answer;
}

/**
 * Revokes a member or registration token of `orgId` and answers whether this call revoked it. In the
 * same batch the token's dashboard sessions end (src/credentials/sessions.ts): a revoked token leaves
 * no session that still acts as it.
 */
export async function revokeToken(db: D1Database, orgId: string, tokenId: string, nowMs: number): Promise<boolean> {
  const orm = drizzle(db);
  const [revoked] = await orm.batch([revokeStatement(orm, orgId, tokenId, nowMs), endRevokedTokenSessions(orm, orgId, tokenId)]);
  return revoked.meta.changes === 1;
}

type Orm = ReturnType<typeof drizzle>;

/**
 * Revokes a member or registration token of `orgId` in one conditional statement, so that of two
 * admins revoking the last two admin tokens at once only one succeeds: an admin token is revoked
 * only while another active admin token of the organization remains. Already revoked: unchanged.
 */
function revokeStatement(orm: Orm, orgId: string, tokenId: string, nowMs: number) {
  const other = alias(tokens, "other");
  const anotherAdmin = orm
    .select({ one: sql`1` })
    .from(other)
    .where(
      and(
        eq(other.orgId, orgId),
        ne(other.id, tokenId),
        eq(other.kind, "member"),
        eq(other.role, "admin"),
        isNull(other.revokedAtMs),
        or(isNull(other.expiresAtMs), gt(other.expiresAtMs, nowMs)),
      ),
    );
  return orm
    .update(tokens)
    .set({ revokedAtMs: nowMs })
    .where(
      and(
        eq(tokens.id, tokenId),
        eq(tokens.orgId, orgId),
        inArray(tokens.kind, ["member", "registration"]),
        isNull(tokens.revokedAtMs),
        or(isNull(tokens.role), ne(tokens.role, "admin"), exists(anotherAdmin)),
      ),
    );
}

/** Deletes the sessions of a token once it is revoked; a token the revocation left active keeps them. */
function endRevokedTokenSessions(orm: Orm, orgId: string, tokenId: string) {
  const revoked = orm
    .select({ one: sql`1` })
    .from(tokens)
    .where(and(eq(tokens.id, tokenId), eq(tokens.orgId, orgId), isNotNull(tokens.revokedAtMs)));
  return orm.delete(dashboardSessions).where(and(eq(dashboardSessions.orgId, orgId), eq(dashboardSessions.tokenId, tokenId), exists(revoked)));
}

/**
 * Takes one registration from a registration token: one conditional UPDATE, so concurrent
 * registrations never take more than `max_uses`. When the token no longer works, throws the 401
 * that says why (it may have expired or been used up since the caller was authenticated).
 */
export async function takeRegistrationUse(db: D1Database, tokenId: string, nowMs: number): Promise<void> {
  const orm = drizzle(db);
  const result = await orm
    .update(tokens)
    .set({ uses: sql`${tokens.uses} + 1` })
    .where(
      and(
        eq(tokens.id, tokenId),
        eq(tokens.kind, "registration"),
        isNull(tokens.revokedAtMs),
        or(isNull(tokens.expiresAtMs), gt(tokens.expiresAtMs, nowMs)),
        or(isNull(tokens.maxUses), lt(tokens.uses, tokens.maxUses)),
      ),
    );
  if (result.meta.changes === 1) return;
  const row = await orm.select(STORED_TOKEN).from(tokens).where(eq(tokens.id, tokenId)).get();
  throw (row && refusalOf(row, nowMs)) || new DocketError("unauthorized", "this registration token no longer works");
}

/** Gives back a use taken by a registration that then failed to be stored. */
export async function returnRegistrationUse(db: D1Database, tokenId: string): Promise<void> {
  await drizzle(db)
    .update(tokens)
    .set({ uses: sql`${tokens.uses} - 1` })
    .where(and(eq(tokens.id, tokenId), gt(tokens.uses, 0)));
}

/** STORED_TOKEN's columns as SQL text, for the claim's counted join (durable-objects/claim-credentials.ts). */
export const TOKEN_COLUMNS = Object.values(STORED_TOKEN)
  .map((column) => column.name)
  .join(", ");
