import { Hono } from "hono";
import { drizzle } from "drizzle-orm/d1";
import type { AppEnv } from "../app-types";
import { rotateCallbackSecret } from "../callbacks/secret";
import { createToken, mintToken } from "../credentials/tokens";
import type { Config } from "../config";
import { orgs, tokens } from "../db/schema";
import { DocketError } from "../errors";
import { newId, randomHex } from "../lib/crypto";
import { log } from "../lib/log";
import { operation } from "../openapi/operation";
import { CreatedOrg, CreatedToken, CreateOrgBody, CreateTokenBody, RotateCallbackSecretBody, RotatedCallbackSecret } from "../protocol/tokens";
import { validate } from "../validate";

/**
 * When a new token expires: its creator's choice, else never for a member token and after the
 * default for a registration token (at most the maximum). An expiry shorter than TOKEN_TTL_MIN_MS is
 * refused: the token would be expired before anyone could use it.
 */
function tokenExpiry(body: CreateTokenBody, config: Config, nowMs: number): number | null {
  if (body.kind === "member" && body.max_uses !== undefined) {
    throw new DocketError("invalid_request", "body max_uses: only registration tokens count their uses", { field: "max_uses" });
  }
  if (body.kind === "registration" && body.role !== undefined) throw new DocketError("invalid_request", "body role: only member tokens have a role", { field: "role" });
  const ttlMs = body.expires_in_ms ?? (body.kind === "registration" ? config.registrationTokenTtlMs : null);
  if (ttlMs === null) return null;
  if (ttlMs < config.tokenTtlMinMs) {
    throw new DocketError("invalid_request", `body expires_in_ms: must be at least ${config.tokenTtlMinMs} (TOKEN_TTL_MIN_MS); a token that expires sooner would be expired before it is used`, { field: "expires_in_ms", min: config.tokenTtlMinMs });
  }
  if (body.kind === "registration" && ttlMs > config.registrationTokenTtlMaxMs) {
    throw new DocketError("invalid_request", `body expires_in_ms: must be at most ${config.registrationTokenTtlMaxMs}`, { field: "expires_in_ms" });
  }
  return nowMs + ttlMs;
}

export const orgRoutes = new Hono<AppEnv>()
  .post(
    "/orgs",
    operation({
      id: "createOrg",
      summary: "Create an organization and its first admin token (operators)",
      tag: "Organizations and tokens",
      auth: "operator",
      responses: { 201: { description: "The organization, its callback secret, and its first admin token.", schema: CreatedOrg } },
    }),
    validate("json", CreateOrgBody), async (c) => {
    const { name } = c.req.valid("json");
    const org = { id: newId("org"), name, callbackSecret: randomHex(32), createdAtMs: Date.now() };
    const { row, answer } = await mintToken(org.id, "member", "admin", "first admin");
    const db = drizzle(c.env.DB);
    await db.batch([db.insert(orgs).values(org), db.insert(tokens).values(row)]);
    return c.json(
      {
        org: { id: org.id, name: org.name, created_at_ms: org.createdAtMs, callback_secret: org.callbackSecret },
        token: answer,
      },
      201,
    );
  })
  .post(
    "/tokens",
    operation({
      id: "createToken",
      summary: "Create a member or runner registration token",
      tag: "Organizations and tokens",
      auth: "admin",
      responses: { 201: { description: "The token; its secret is shown only here.", schema: CreatedToken } },
    }),
    validate("json", CreateTokenBody), async (c) => {
    const body = c.req.valid("json");
    const role = body.kind === "member" ? (body.role ?? "member") : null;
    const now = Date.now();
    const limits = { createdAtMs: now, expiresAtMs: tokenExpiry(body, c.get("config"), now), maxUses: body.max_uses ?? null };
    return c.json(await createToken(c.env.DB, c.get("caller").orgId, body.kind, role, body.name ?? null, limits), 201);
  })
  .post(
    "/orgs/current/callback-secret/rotate",
    operation({
      id: "rotateCallbackSecret",
      summary: "Rotate the secret completion callbacks are signed with",
      tag: "Organizations and tokens",
      auth: "admin",
      responses: { 200: { description: "The new secret; the previous one still signs callbacks for a while.", schema: RotatedCallbackSecret } },
      errors: ["not_found"],
    }),
    validate("json", RotateCallbackSecretBody), async (c) => {
    const caller = c.get("caller");
    const now = Date.now();
    const secret = await rotateCallbackSecret(c.env.DB, caller.orgId, now);
    if (secret === null) throw new DocketError("not_found", "this organization no longer exists");
    log("org.callback_secret_rotated", { org: caller.orgId, by: caller.tokenId, reason: "an admin rotated the callback secret" });
    const previousValidUntilMs = now + c.get("config").callbackSecretOverlapMs;
    return c.json({ callback_secret: secret, rotated_at_ms: now, previous_secret_valid_until_ms: previousValidUntilMs });
  });
