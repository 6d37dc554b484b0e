import type { Config } from "./config";
import type { Env } from "./env";
import type { Cost } from "./lib/cost";
import type { RecoveryRow } from "./recovery";

export interface Caller {
  orgId: string;
  tokenId: string;
  kind: "member" | "registration" | "machine";
  role: "admin" | "member" | null;
  machineId: string | null;
  /** The machine's row, when the route asked for it with the token (requireMachineWithRow). */
  machine?: { labels: string; deregisteredAtMs: number | null; lastSeenAtMs: number; sweep: RecoveryRow | null };
}

export interface AppEnv {
  Bindings: Env;
  /**
   * `cost` is what the request has cost so far (src/lib/cost.ts), started by the auth middleware.
   * `db`: the request's D1 session on the routes that take x-d1-bookmark (src/lib/read-session.ts).
   */
  Variables: { config: Config; caller: Caller; cost: Cost; db: D1Database };
}
