import { Hono } from "hono";
import { drizzle } from "drizzle-orm/d1";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { requireAdmin, requireMember, requireOperator } from "../auth";
import { orgs, tokens } from "../db/schema";
import { newId, newToken, randomHex, sha256Hex } from "../lib/crypto";
import { validate } from "../validate";

const createOrg = z.object({ name: z.string().trim().min(1).max(100) }).strict();

const createToken = z
  .object({
    kind: z.enum(["member", "registration"]),
    role: z.enum(["admin", "member"]).optional(),
    name: z.string().trim().min(1).max(100).optional(),
  })
  .strict();

/** Creates a token row and answers the token itself, which is never shown again. */
async function mintToken(
  db: D1Database,
  orgId: string,
  kind: "member" | "registration",
  role: "admin" | "member" | null,
  name: string | null,
) {
  const token = newToken(kind);
  const row = { id: newId("tok"), orgId, kind, role, name, tokenHash: await sha256Hex(token), machineId: null, createdAtMs: Date.now() };
  return { row, answer: { id: row.id, token, kind, role, name, created_at_ms: row.createdAtMs } };
}

export const orgRoutes = new Hono<AppEnv>()
  .post("/orgs", requireOperator, validate("json", createOrg), async (c) => {
    const { name } = c.req.valid("json");
    const org = { id: newId("org"), name, callbackSecret: randomHex(32), createdAtMs: Date.now() };
    const { row, answer } = await mintToken(c.env.DB, org.id, "member", "admin", "first admin");
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
  .post("/tokens", requireMember, requireAdmin, validate("json", createToken), async (c) => {
    const body = c.req.valid("json");
    const role = body.kind === "member" ? (body.role ?? "member") : null;
    const { row, answer } = await mintToken(c.env.DB, c.get("caller").orgId, body.kind, role, body.name ?? null);
    await drizzle(c.env.DB).insert(tokens).values(row);
    return c.json(answer, 201);
  });
