// Credit: the balance with the entries behind it, admin grants, and the ledger audit
// (../shared/DESIGN.md, invariant 5; ../shared/spec/build-lifecycle.md).

import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { requireAdmin, requireMember } from "../auth";
import { audit, grant, listEntries, readBalance } from "../ledger/ledger";
import { pageQuery, pageSize, seqCursor } from "../lib/pagination";
import { idempotencyKeyOf, validate } from "../validate";

const MAX_GRANT_CENTS = 100_000_000; // $1,000,000 in one grant

const grantBody = z
  .object({
    amount_cents: z.number().int().min(1).max(MAX_GRANT_CENTS),
    note: z.string().trim().min(1).max(1_000).optional(),
  })
  .strict();

const entriesQuery = z
  .object({
    ...pageQuery(seqCursor),
    job_id: z.string().min(1).max(128).optional(),
  })
  .strict();

export const creditRoutes = new Hono<AppEnv>()
  .get("/credits", requireMember, validate("query", entriesQuery), async (c) => {
    const q = c.req.valid("query");
    const orgId = c.get("caller").orgId;
    const config = c.get("config");
    const balance = await readBalance(c.env.DB, orgId);
    const entries = await listEntries(c.env.DB, orgId, { cursor: q.cursor, limit: pageSize(q.limit, 50, config.pageSizeMax), jobId: q.job_id });
    return c.json({
      ...balance,
      limits: { min_available_cents: config.buildMinAvailableCents, reservation_cents: config.buildReservationCents },
      ...entries,
    });
  })
  .post("/credits/grants", requireMember, requireAdmin, validate("json", grantBody), async (c) => {
    const key = idempotencyKeyOf(c.req);
    const body = c.req.valid("json");
    const caller = c.get("caller");
    const result = await grant(c.env.DB, {
      orgId: caller.orgId,
      amountCents: body.amount_cents,
      actor: `member:${caller.tokenId}`,
      note: body.note ?? null,
      externalKey: key,
    });
    return c.json({ entry: result.entry, ...(await readBalance(c.env.DB, caller.orgId)) }, result.replayed ? 200 : 201);
  })
  .get("/credits/audit", requireMember, async (c) => c.json(await audit(c.env.DB, c.get("caller").orgId)));
