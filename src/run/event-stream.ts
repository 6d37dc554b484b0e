// The Worker's side of a run's live event stream (docs/protocol.md, "Live events"): the member is
// authorized and the resume point read at the edge, then the run object serves the stream itself,
// since it sees each event the moment it is written (durable-objects/run-streams.ts). This request
// is the one contract between the two ends: the Worker makes it, the object reads it.

import type { Env } from "../env";
import { runStub } from "../lib/stubs";

/** The Worker authorizes the member and names the organization; the object checks it owns the run. */
export const STREAM_ORG_HEADER = "Docket-Org";

export function streamRequest(runId: string, orgId: string, afterSeq: number): Request {
  return new Request(`https://run.internal/runs/${runId}/events/stream?after=${afterSeq}`, {
    headers: { [STREAM_ORG_HEADER]: orgId },
  });
}

/** The resume point the Worker put in the request; 0 when it is missing or malformed. */
export function streamAfter(request: Request): number {
  const after = Number(new URL(request.url).searchParams.get("after") ?? "0");
  return Number.isSafeInteger(after) && after >= 0 ? after : 0;
}

/** The organization's run's events after `afterSeq`, as the run object streams them (or its refusal). */
export function followRunEvents(env: Env, orgId: string, runId: string, afterSeq: number): Promise<Response> {
  return runStub(env, runId).fetch(streamRequest(runId, orgId, afterSeq));
}
