// The handler of both resolve routes (a build job's, an autopilot run reservation's): an admin
// resolves a holder held for cost review or reconciliation with the reconciled cost
// (src/ledger/settle-held.ts resolveHeld; docs/protocol.md, "Cost review and reconciliation").

import type { Context } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../app-types";
import type { Env } from "../env";
import type { Resolution } from "../ledger/settle-held";
import type { ResolveBuildJobBody } from "../protocol/builds";

type ResolveRequest<P> = { out: { param: P; json: z.infer<typeof ResolveBuildJobBody> } };

/**
 * The body's reconciled cost and note, resolved by the calling member on the holder its path
 * names (`resolve` finds it in the caller's organization and answers as the holder's read does).
 */
export function resolveHandler<P, T>(resolve: (env: Env, orgId: string, path: P, input: Resolution) => Promise<T>) {
  return async (c: Context<AppEnv, string, ResolveRequest<P>>) => {
    const caller = c.get("caller");
    const body = c.req.valid("json");
    const input = { costCents: body.cost_cents, note: body.note, actor: `member:${caller.tokenId}` };
    return c.json(await resolve(c.env, caller.orgId, c.req.valid("param"), input));
  };
}
