// Credit: the balance and the append-only ledger behind it, admin grants, and the audit
// (docs/protocol.md, "Credit"; ../shared/DESIGN.md, invariant 5).

import { z } from "zod";
import { epochMs, pageQuery, seqCursor } from "./common.js";

/** What a ledger entry records (docs/protocol.md, "Credit": what each kind moves). */
export const LEDGER_KINDS = ["grant", "reserve", "settle", "release", "charge"] as const;

/** The most one grant gives: $1,000,000. */
export const MAX_GRANT_CENTS = 100_000_000;

export const GetCreditsQuery = z
  .object({
    ...pageQuery(seqCursor),
    job_id: z.string().min(1).max(128).optional(),
  })
  .strict();

export const GrantCreditsBody = z
  .object({
    amount_cents: z.number().min(1).max(MAX_GRANT_CENTS).int(),
    note: z.string().trim().min(1).max(1_000).optional(),
  })
  .strict();

// ---- answers -------------------------------------------------------------------------------------

/** The organization's money: available + held + spent = granted, always. */
export const Balance = z.object({
  granted_cents: z.number().int(),
  available_cents: z.number().int(),
  held_cents: z.number().int(),
  spent_cents: z.number().int(),
}).meta({ id: "Balance" });

export const CreditEntry = z.object({
  seq: z.number().int().min(1).describe("its number in the organization's ledger, from 1"),
  id: z.string().describe("the entry's id (led_…)"),
  kind: z.enum(LEDGER_KINDS),
  amount_cents: z.number().int().describe("the amount moved, positive"),
  job_id: z.string().nullable().describe("the build job it belongs to; null for a grant"),
  request_id: z.string().nullable().describe("the build request of that job"),
  run_id: z.string().nullable().optional().describe("the autopilot run whose model-spend reservation it belongs to (docs/protocol.md, \"Autopilot scheduler\"); null otherwise"),
  actor: z.string().describe("who wrote it: member:<token id> or system"),
  note: z.string().nullable(),
  created_at_ms: epochMs,
}).meta({ id: "CreditEntry" });
export type CreditEntry = z.infer<typeof CreditEntry>;

/** GET /v1/credits: the balance, the dispatch limits, and a page of entries, newest first. */
export const Credits = Balance.extend({
  limits: z.object({
    min_available_cents: z.number().int().describe("BUILD_MIN_AVAILABLE_CENTS: a dispatch needs at least this much available"),
    reservation_cents: z.number().int().describe("BUILD_RESERVATION_CENTS: what a dispatch reserves at most"),
  }),
  entries: z.array(CreditEntry),
  next_cursor: z.string().nullable(),
});

/** A grant's answer: its entry and the balance after it. */
export const CreditGrant = Balance.extend({ entry: CreditEntry });

export const CreditAuditProblem = z.object({
  what: z.string(),
  job_id: z.string().optional(),
  expected: z.number().int().optional(),
  found: z.number().int().optional(),
});

/** The ledger recomputed from its entries and compared with what is stored. */
export const CreditAudit = z.object({
  ok: z.boolean().describe("true when nothing differs"),
  identity: z.boolean().describe("available + held + spent = granted in the stored balance"),
  balance: Balance.describe("as stored"),
  derived: Balance.describe("as the entries add up"),
  entries: z.number().int().describe("how many entries the ledger has"),
  jobs: z.number().int().describe("how many build jobs were checked"),
  problems: z.array(CreditAuditProblem),
});
export type CreditAudit = z.infer<typeof CreditAudit>;
