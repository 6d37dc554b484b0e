// The organization's callback secret and its rotation: the new secret signs every callback at once,
// and the one it replaced signs them too until CALLBACK_SECRET_OVERLAP_MS has passed, so receivers
// can switch over without a callback they cannot verify (docs/callbacks.md, "Rotating the secret").

import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { orgs } from "../db/schema";
import { randomHex } from "../lib/crypto";

type OrgSecrets = Pick<typeof orgs.$inferSelect, "callbackSecret" | "previousCallbackSecret" | "callbackSecretRotatedAtMs">;

/** The secrets a callback sent at `nowMs` is signed with: the current one first. */
export function signingSecrets(org: OrgSecrets, overlapMs: number, nowMs: number): string[] {
  const inOverlap = org.previousCallbackSecret !== null && org.callbackSecretRotatedAtMs !== null && nowMs < org.callbackSecretRotatedAtMs + overlapMs;
  return inOverlap ? [org.callbackSecret, org.previousCallbackSecret!] : [org.callbackSecret];
}

/**
 * Replaces the secret in one statement (SQLite reads the old values on the right-hand side), so two
 * rotations at once leave a consistent pair. A second rotation within the window drops the oldest.
 */
export async function rotateCallbackSecret(db: D1Database, orgId: string, nowMs: number): Promise<string | null> {
  const secret = randomHex(32);
  const [row] = await drizzle(db)
    .update(orgs)
    .set({ previousCallbackSecret: sql`${orgs.callbackSecret}`, callbackSecret: secret, callbackSecretRotatedAtMs: nowMs })
    .where(eq(orgs.id, orgId))
    .returning({ callbackSecret: orgs.callbackSecret });
  return row?.callbackSecret ?? null;
}
