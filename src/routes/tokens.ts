// Listing and revoking member and registration tokens (admin). Machine tokens are managed through
// their machines: DELETE /v1/runners/:id revokes one (docs/protocol.md, "Organizations and tokens").

import { and, desc, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { requireAdmin, requireMember } from "../auth";
import { revokeStatement, tokenView } from "../credentials/tokens";
import { tokens } from "../db/schema";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { afterCursor, keysetCursor, pageOf, pageQuery, pageSize } from "../lib/pagination";
import { validate } from "../validate";

const listQuery = z
  .object({
    kind: z.enum(["member", "registration"]).optional(),
    ...pageQuery(keysetCursor("tok_[0-9a-f]{24}")),
  })
  .strict();

const tokenIdParam = z.object({ id: z.string().regex(/^tok_[0-9a-f]{24}$/, "must be a token id like tok_<24 hex digits>") });

/** One member or registration token of the organization, or null (machine tokens are not listed here). */
async function readToken(db: D1Database, orgId: string, id: string) {
  const row = await drizzle(db)
    .select()
    .from(tokens)
    .where(and(eq(tokens.orgId, orgId), eq(tokens.id, id), inArray(tokens.kind, ["member", "registration"])))
    .get();
  return row ?? null;
}

export const tokenRoutes = new Hono<AppEnv>()
  .get("/tokens", requireMember, requireAdmin, validate("query", listQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(tokens.orgId, c.get("caller").orgId), inArray(tokens.kind, q.kind ? [q.kind] : ["member", "registration"])];
    if (q.cursor) conditions.push(afterCursor(tokens.createdAtMs, tokens.id, q.cursor));
    const rows = await drizzle(c.env.DB)
      .select()
      .from(tokens)
      .where(and(...conditions))
      .orderBy(desc(tokens.createdAtMs), desc(tokens.id))
      .limit(limit + 1);
    const { kept, next } = pageOf(rows, limit);
    const now = Date.now();
    return c.json({ tokens: kept.map((t) => tokenView(t, now)), next_cursor: next });
  })
  .delete("/tokens/:id", requireMember, requireAdmin, validate("param", tokenIdParam), async (c) => {
    const { id } = c.req.valid("param");
    const caller = c.get("caller");
    const now = Date.now();
    const changed = (await revokeStatement(c.env.DB, caller.orgId, id, now).run()).meta.changes === 1;
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
