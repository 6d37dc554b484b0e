// What a claim answers across the scheduler's RPC boundary: one type for the object that makes it
// (durable-objects/scheduler-object.ts) and the route that reads it (src/routes/runners.ts).

import type { Refusal } from "../errors";
import type { Cost } from "../lib/cost";
import type { ClaimGrant } from "../protocol/runners";

/**
 * A claim's answer and what it cost: every round's D1 rows and Durable Object requests. `shed`:
 * no work, and the scheduler already holds CLAIM_WAITERS_MAX long-polls, so this one was not kept.
 * `refused`: its token no longer works, or an admin deregistered the machine while its claim was
 * on its way or waiting. `held`: a recovery holds dispatch (src/recovery.ts), and why.
 */
export interface ClaimAnswer {
  grant: ClaimGrant | null;
  cost: Cost;
  shed?: { limit: number };
  refused?: Refusal;
  held?: string;
}
