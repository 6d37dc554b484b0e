// Listing, reading, renaming and revoking member and registration tokens (admin). Machine tokens are managed through
// their machines: DELETE /v1/runners/:id revokes one (docs/protocol.md, "Organizations and tokens").

import { and, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { revokeToken, tokenView } from "../credentials/tokens";
import { tokens } from "../db/schema";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { listPage, pageSize } from "../lib/pagination";
import { operation } from "../openapi/operation";
import { ListTokensQuery, RenameTokenBody, Token, TokenPage, TokenPath } from "../protocol/tokens";
import { validate } from "../validate";

/** One member or registration token of the organization, or null (machine tokens are not listed here). */
async function readToken(db: D1Database, orgId: string, id: string) {
  const row = await drizzle(db)
    .select()
    .from(tokens)
    .where(and(eq(tokens.orgId, orgId), eq(tokens.id, id), inArray(tokens.kind, ["member", "registration"])))
    .get();
  return row ?? null;
}

/** Renames a member or registration token of the organization; answers whether there was one. */
async function renameToken(db: D1Database, orgId: string, id: string, name: string): Promise<boolean> {
  const result = await drizzle(db)
    .update(tokens)
    .set({ name })
    .where(and(eq(tokens.orgId, orgId), eq(tokens.id, id), inArray(tokens.kind, ["member", "registration"])));
  return result.meta.changes === 1;
}

export const tokenRoutes = new Hono<AppEnv>()
  .get(
    "/tokens",
    operation({
      id: "listTokens",
      summary: "List the organization's member and registration tokens",
      tag: "Organizations and tokens",
      auth: "admin",
      responses: { 200: { description: "A page of tokens, newest first.", schema: TokenPage } },
    }),
    validate("query", ListTokensQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(tokens.orgId, c.get("caller").orgId), inArray(tokens.kind, q.kind ? [q.kind] : ["member", "registration"])];
    const { kept, next } = await listPage(c.env.DB, tokens, conditions, q.cursor, limit, { at: "createdAtMs" });
    const now = Date.now();
    return c.json({ tokens: kept.map((t) => tokenView(t, now)), next_cursor: next });
  })
  .get(
    "/tokens/:id",
    operation({
      id: "getToken",
      summary: "Read one member or registration token",
      tag: "Organizations and tokens",
      auth: "admin",
      responses: { 200: { description: "The token, as the list shows it.", schema: Token } },
      errors: ["not_found"],
    }),
    validate("param", TokenPath), async (c) => {
    const { id } = c.req.valid("param");
    const row = await readToken(c.env.DB, c.get("caller").orgId, id);
    if (!row) throw new DocketError("not_found", `no token ${id} in this organization`);
    return c.json(tokenView(row, Date.now()));
  })
  .patch(
    "/tokens/:id",
    operation({
      id: "renameToken",
      summary: "Rename a member or registration token",
      description: "Only the name changes: the secret, role, expiry and uses stay as they were. A revoked or expired token may be renamed too.",
      tag: "Organizations and tokens",
      auth: "admin",
      responses: { 200: { description: "The token, renamed.", schema: Token } },
      errors: ["not_found"],
    }),
    validate("param", TokenPath), validate("json", RenameTokenBody), async (c) => {
    const { id } = c.req.valid("param");
    const { name } = c.req.valid("json");
    const caller = c.get("caller");
    if (!(await renameToken(c.env.DB, caller.orgId, id, name))) throw new DocketError("not_found", `no token ${id} in this organization`);
    const row = await readToken(c.env.DB, caller.orgId, id);
    if (!row) throw new DocketError("not_found", `no token ${id} in this organization`);
    log("token.renamed", { org: caller.orgId, token: id, kind: row.kind, by: caller.tokenId, reason: "an admin renamed it" });
    return c.json(tokenView(row, Date.now()));
  })
  .delete(
    "/tokens/:id",
    operation({
      id: "revokeToken",
      summary: "Revoke a member or registration token",
      description: "Revoking a revoked token answers it unchanged. The last active admin token cannot be revoked.",
      tag: "Organizations and tokens",
      auth: "admin",
      responses: { 200: { description: "The token, revoked.", schema: Token } },
      errors: ["not_found", "last_admin_token"],
    }),
    validate("param", TokenPath), async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const now = Date.now();
    const changed = await revokeToken(c.env.DB, caller.orgId, id, now);
    const row = await readToken(c.env.DB, caller.orgId, id);
    if (!row) throw new DocketError("not_found", `no token ${id} in this organization`);
    if (!changed && row.revokedAtMs === null) {
      // Active, yet not revoked: it is the organization's last active admin token.
      throw new DocketError("last_admin_token", "this is the organization's last active admin token; mint another admin token before revoking it", {
        token_id: id,
      });
    }
    if (changed) log("token.revoked", { org: caller.orgId, token: id, kind: row.kind, by: caller.tokenId, reason: "an admin revoked it" });
    return c.json(tokenView(row, now));
  });
