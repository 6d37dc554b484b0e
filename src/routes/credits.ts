// Credit: the balance with the entries behind it, admin grants, and the ledger audit
// (../shared/DESIGN.md, invariant 5; ../shared/spec/build-lifecycle.md).

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { audit, grant, listEntries, readBalance } from "../ledger/ledger";
import { pageSize } from "../lib/pagination";
import { d1Session } from "../lib/read-session";
import { bookmarkHeader, idempotencyKeyHeader } from "../openapi/headers";
import { operation } from "../openapi/operation";
import { CreditAudit, CreditGrant, Credits, GetCreditsQuery, GrantCreditsBody } from "../protocol/credits";
import { idempotencyKeyOf, validate } from "../validate";

export const creditRoutes = new Hono<AppEnv>()
  .get(
    "/credits",
    operation({
      id: "getCredits",
      summary: "Read the credit balance and its ledger entries",
      description: "The balance (available + held + spent = granted), the dispatch limits, and a page of entries, newest first; job_id keeps one build job's entries.",
      tag: "Credits",
      auth: "member",
      responses: { 200: { description: "The balance and a page of entries.", schema: Credits } },
      headers: [bookmarkHeader()],
    }),
    d1Session,
    validate("query", GetCreditsQuery), async (c) => {
    const q = c.req.valid("query");
    const orgId = c.get("caller").orgId;
    const config = c.get("config");
    const balance = await readBalance(c.get("db"), orgId);
    const entries = await listEntries(c.get("db"), orgId, { cursor: q.cursor, limit: pageSize(q.limit, 50, config.pageSizeMax), jobId: q.job_id });
    return c.json({
      ...balance,
      limits: { min_available_cents: config.buildMinAvailableCents, reservation_cents: config.buildReservationCents },
      ...entries,
    });
  })
  .post(
    "/credits/grants",
    operation({
      id: "grantCredits",
      summary: "Grant credit to the organization",
      tag: "Credits",
      auth: "admin",
      responses: {
        201: { description: "The grant's entry and the balance after it.", schema: CreditGrant },
        200: { description: "The entry the same Idempotency-Key and payload granted before (nothing granted again), and the balance now.", schema: CreditGrant },
      },
      errors: ["idempotency_conflict"],
      headers: [idempotencyKeyHeader("a grant's key is stored on its entry and holds forever, so money is never granted twice.")],
    }),
    validate("json", GrantCreditsBody), async (c) => {
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
  .get(
    "/credits/audit",
    operation({
      id: "getCreditAudit",
      summary: "Audit the ledger",
      description: "Recomputes the totals from the entries and every build job's money from its own entries; ok is false with each mismatch in problems.",
      tag: "Credits",
      auth: "member",
      responses: { 200: { description: "The audit.", schema: CreditAudit } },
    }),
    async (c) => c.json(await audit(c.env.DB, c.get("caller").orgId)));
