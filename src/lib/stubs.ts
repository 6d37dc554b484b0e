// The Durable Object stubs by name: one run object per run id, one scheduler object per org.

import type { Env } from "../env";

export function runStub(env: Env, runId: string) {
  return env.RUN.get(env.RUN.idFromName(runId));
}

export function schedulerStub(env: Env, orgId: string) {
  return env.SCHEDULER.get(env.SCHEDULER.idFromName(orgId));
}
