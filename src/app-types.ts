import type { Config } from "./config";
import type { Env } from "./env";

export interface Caller {
  orgId: string;
  tokenId: string;
  kind: "member" | "registration" | "machine";
  role: "admin" | "member" | null;
  machineId: string | null;
}

export interface AppEnv {
  Bindings: Env;
  Variables: { config: Config; caller: Caller };
}
