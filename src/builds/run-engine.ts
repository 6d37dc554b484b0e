// The build dispatcher's two calls into the run engine, behind one object: creating a run keyed by
// the job id, and reading a run. Tests replace a method to make the run object unreachable.

import type { Env } from "../env";
import { isRefusal } from "../errors";
import { dispatchRun, type DispatchInput } from "../run/dispatch";
import { runStub } from "../lib/stubs";
import type { RunView } from "../run/view";

export const runEngine = {
  /** Creates the run, or replays it: the same key and payload never create a second run. */
  async dispatch(env: Env, orgId: string, body: DispatchInput, key: string): Promise<RunView> {
    return (await dispatchRun(env, orgId, body, key)).run;
  },

  /** The run as its object knows it, or null when the object has no such run. Throws when unreachable. */
  async read(env: Env, orgId: string, runId: string): Promise<RunView | null> {
    const answer = await runStub(env, runId).read(orgId);
    return isRefusal(answer) ? null : answer;
  },

  /** Cancels a run created for a job whose reservation was already released (a late dispatch). */
  async cancel(env: Env, orgId: string, runId: string, reason: string): Promise<void> {
    await runStub(env, runId).cancel(orgId, "docket:builds", reason);
  },
};
