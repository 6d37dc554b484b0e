// A run's tracker deliveries (blocker comment, review label, PR comment) and an operator's retry of
// a failed one (docs/protocol.md, "Tracker deliveries"). The receipts live in D1; the run is only
// read, never changed.

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { unwrap } from "../errors";
import { runStub } from "../lib/stubs";
import { operation } from "../openapi/operation";
import { RetriedTrackerDelivery, RetryTrackerDeliveryBody, RunPath, TrackerDeliveries, TrackerDeliveryPath } from "../protocol/runs";
import { retryTrackerDelivery } from "../tracker/deliver";
import { listTrackerDeliveries, trackerDeliveryView } from "../tracker/receipts";
import { validate } from "../validate";

export const deliveryRoutes = new Hono<AppEnv>()
  .get(
    "/runs/:id/deliveries",
    operation({
      id: "listRunDeliveries",
      summary: "A run's tracker deliveries, with their status, tries, last error and receipt",
      description: "Empty for a run without a tracker ticket. A failed delivery never changed the run; POST …/retry sends it again.",
      tag: "Autopilot",
      auth: "member",
      responses: { 200: { description: "The run's deliveries, oldest first.", schema: TrackerDeliveries } },
      errors: ["not_found"],
    }),
    validate("param", RunPath),
    async (c) => {
      const { id } = c.req.valid("param");
      unwrap(await runStub(c.env, id).read(c.get("caller").orgId));
      const rows = await listTrackerDeliveries(c.env.DB, id);
      return c.json({ run_id: id, deliveries: rows.map((row) => trackerDeliveryView(row, c.get("config"))) });
    },
  )
  .post(
    "/runs/:id/deliveries/:kind/retry",
    operation({
      id: "retryRunDelivery",
      summary: "Retry a failed tracker delivery",
      description: "A new round of up to TRACKER_DELIVERY_MAX_ATTEMPTS tries; a comment already on the ticket is found by its marker, never posted twice. 409 invalid_transition unless the delivery failed.",
      tag: "Autopilot",
      auth: "admin",
      responses: { 202: { description: "The delivery, pending again.", schema: RetriedTrackerDelivery } },
      errors: ["not_found", "invalid_transition"],
    }),
    validate("param", TrackerDeliveryPath),
    validate("json", RetryTrackerDeliveryBody),
    async (c) => {
      const { id, kind } = c.req.valid("param");
      const caller = c.get("caller");
      const row = await retryTrackerDelivery(c.env, caller.orgId, id, kind, `member:${caller.tokenId}`);
      return c.json({ run_id: id, delivery: trackerDeliveryView(row, c.get("config")) }, 202);
    },
  );
