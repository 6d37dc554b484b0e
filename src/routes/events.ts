// A run's events as they happen, and an operator's redelivery of events and of the completion
// callback (docs/protocol.md, "Live events" and "Redelivery"; docs/callbacks.md).

import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { callbackView } from "../callbacks/deliveries";
import { redeliverCallback } from "../callbacks/schedule";
import { DocketError, unwrap } from "../errors";
import { validate } from "../validate";
import { operation } from "../openapi/operation";
import { RedeliverCallbackBody, RedeliveredCallback, RedeliveredEvents, RedeliverEventsBody, RunPath, seqText, StreamRunEventsQuery } from "../protocol/runs";
import { runStub } from "../lib/stubs";
import { followRunEvents } from "../run/event-stream";

/**
 * Where a stream resumes: after the Last-Event-ID an EventSource sends when it reconnects, which
 * wins over ?after= (the reconnect repeats the original URL), else after ?after=, else from the start.
 */
function resumeAfter(lastEventId: string | undefined, after: string | undefined): number {
  if (lastEventId !== undefined && lastEventId.trim() !== "") {
    const parsed = seqText.safeParse(lastEventId.trim());
    if (!parsed.success) {
      throw new DocketError("invalid_request", `header Last-Event-ID: ${parsed.error.issues[0].message}`, { field: "Last-Event-ID" });
    }
    return Number(parsed.data);
  }
  return after === undefined ? 0 : Number(after);
}

export const eventRoutes = new Hono<AppEnv>()
  .get(
    "/runs/:id/events/stream",
    operation({
      id: "streamRunEvents",
      summary: "Follow a run's events live (server-sent events)",
      description:
        "Each event is one SSE message whose id is its seq and whose data is the event as listRunEvents shows it; " +
        "an `end` event closes the stream once the run has ended and every event was sent. The stream starts after " +
        "the Last-Event-ID header when sent (it wins over ?after=), else after ?after=, else from the start. " +
        "It lasts at most STREAM_MAX_DURATION_MS, then closes without `end`: reconnect with Last-Event-ID.",
      tag: "Events",
      auth: "member",
      responses: {
        200: { description: "The event stream.", schema: z.string().describe("text/event-stream"), contentType: "text/event-stream" },
        204: { description: "The run has ended and there is no event after the resume point." },
      },
      errors: ["not_found", "events_pruned", "too_many_streams"],
      headers: [
        {
          name: "Last-Event-ID",
          description: "Resume after this sequence number (an EventSource sends it when it reconnects); a non-negative integer, else 400 invalid_request.",
        },
      ],
    }),
    validate("param", RunPath),
    validate("query", StreamRunEventsQuery), async (c) => {
    const { id } = c.req.valid("param");
    const after = resumeAfter(c.req.header("Last-Event-ID"), c.req.valid("query").after);
    return followRunEvents(c.env, c.get("caller").orgId, id, after);
  })
  .post(
    "/runs/:id/events/redeliver",
    operation({
      id: "redeliverRunEvents",
      summary: "Publish a run's events to the Queue again",
      description: "Sent or not, including those whose publishing attempts ran out; the consumer stores each (run_id, seq) once, so nothing is duplicated.",
      tag: "Events",
      auth: "admin",
      responses: { 202: { description: "The events were put back to be published.", schema: RedeliveredEvents } },
      errors: ["not_found"],
    }),
    validate("param", RunPath),
    validate("json", RedeliverEventsBody),
    async (c) => {
      const { id } = c.req.valid("param");
      const after = c.req.valid("json").after ?? 0;
      const result = unwrap(await runStub(c.env, id).redeliverEvents(c.get("caller").orgId, after));
      return c.json({ run_id: id, after, requeued: result.requeued, outbox: result.outbox }, 202);
    },
  )
  .post(
    "/runs/:id/callback/redeliver",
    operation({
      id: "redeliverRunCallback",
      summary: "Send a run's completion callback again",
      description: "A new round of attempts (docs/callbacks.md); 409 invalid_transition when the run has not ended or has no callback_url.",
      tag: "Events",
      auth: "admin",
      responses: { 202: { description: "The new round of the callback's delivery.", schema: RedeliveredCallback } },
      errors: ["not_found", "invalid_transition"],
    }),
    validate("param", RunPath),
    validate("json", RedeliverCallbackBody),
    async (c) => {
      const { id } = c.req.valid("param");
      const caller = c.get("caller");
      const row = await redeliverCallback(c.env, caller.orgId, id, `member:${caller.tokenId}`);
      return c.json({ run_id: id, callback: callbackView(row.url, row, c.get("config")) }, 202);
    },
  );
