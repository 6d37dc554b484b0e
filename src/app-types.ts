import type { Config } from "./config";
import type { Env } from "./env";
import type { Cost } from "./lib/cost";

export interface Caller {
  orgId: string;
  tokenId: string;
  kind: "member" | "registration" | "machine";
  role: "admin" | "member" | null;
  machineId: string | null;
}

export interface AppEnv {
  Bindings: Env;
  /**
   * `cost` is what the request has cost so far (src/lib/cost.ts), started by the auth middleware.
   * `db`: the request's D1 session on the routes that take x-d1-bookmark (src/lib/read-session.ts).
   * `tokenHash`: a claim's machine token, hashed, for its scheduler (requireClaimingMachine).
   */
  Variables: { config: Config; caller: Caller; cost: Cost; db: D1Database; tokenHash: string };
}
