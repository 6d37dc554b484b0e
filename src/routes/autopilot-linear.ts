// The Linear webhook of an autopilot project whose tracker is a Linear team (docs/protocol.md,
// "Autopilot admission"; docs/autopilot.md, "Linear"): public, verified with @linear/sdk's
// LinearWebhookClient, and like the GitHub door it only reads which issue a delivery names and hands
// it to the AUTOPILOT queue; admission reads the issue itself (src/autopilot/admission.ts), and
// reconciliation still finds what a lost delivery would have said.

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { operation } from "../openapi/operation";
import { AutopilotProjectPath, WebhookAccepted } from "../protocol/autopilot";
import { validate } from "../validate";
import type { AdmissionProject } from "../autopilot/deps";
import type { AutopilotMessage } from "../autopilot/queue";
import { LINEAR_WEBHOOK_TYPES, linearTicketsOfDelivery, verifiedLinearPayload, type LinearWebhookTicket } from "../autopilot/linear/webhook";
import { ignored, signedProject } from "./autopilot-admission";

/** What every delivery that no Linear project at its URL signed, freshly, is answered. */
const UNSIGNED =
  "Linear-Signature is missing or does not sign this body with the webhook signing secret of the Linear project at this URL, or its webhookTimestamp is more than a minute from now";

/**
 * The issue number of `ticket` when its identifier is of the project's team (ENG-12 of team ENG),
 * else null. A Linear project's ticket scope is `<workspace>/<team key>` (src/autopilot/tracker-config.ts).
 */
function numberInTeam(project: AdmissionProject, ticket: LinearWebhookTicket): number | null {
  const team = project.ticketScope?.split("/").at(-1);
  const match = ticket.identifier ? /^([A-Za-z0-9_]+)-(\d+)$/.exec(ticket.identifier) : null;
  return match && team && match[1].toLowerCase() === team.toLowerCase() ? Number(match[2]) : null;
}

export const autopilotLinearRoutes = new Hono<AppEnv>().post(
  "/autopilot/projects/:id/linear/webhook",
  operation({
    id: "receiveAutopilotLinearWebhook",
    summary: "Receive a Linear webhook delivery for an autopilot project",
    description:
      "Public; for a project whose tracker is Linear. Verified with @linear/sdk's LinearWebhookClient: Linear-Signature is the hex HMAC-SHA256 of the raw body " +
      "with the project's webhook signing secret, and the body's webhookTimestamp must be within a minute of now. A missing or wrong signature, a stale " +
      "webhookTimestamp, an unknown project and a project whose tracker is not Linear are the same 401. Issue, Comment and IssueRelation deliveries about " +
      "an issue of the project's team are handed to admission; other types are acknowledged and ignored. Answers 202 at once; a repeated Linear-Delivery admits nothing new.",
    tag: "Autopilot",
    auth: "none",
    responses: { 202: { description: "Accepted: handed to admission, or ignored with the reason.", schema: WebhookAccepted } },
    errors: ["unauthorized", "autopilot_not_configured"],
    headers: [
      { name: "Linear-Signature", description: "<hex HMAC-SHA256 of the raw body with the project's webhook signing secret>.", required: true },
      { name: "Linear-Delivery", description: "The delivery's id, the same on a retry: deduplicates it.", required: true },
      { name: "Linear-Event", description: "The resource type (Issue, Comment, IssueRelation, …); the body's type is what counts." },
    ],
  }),
  validate("param", AutopilotProjectPath),
  async (c) => {
    const { id } = c.req.valid("param");
    const body = await c.req.text();
    const signature = c.req.header("Linear-Signature");
    const { project, signed: payload } = await signedProject(c.env, id, async (secret) => verifiedLinearPayload(secret, body, signature), UNSIGNED, (p) => p.provider === "linear");
    const deliveryId = c.req.header("Linear-Delivery") ?? "";
    if (deliveryId === "" || deliveryId.length > 200) throw new DocketError("invalid_request", "header Linear-Delivery: required, at most 200 characters", { field: "Linear-Delivery" });
    const type = typeof payload.type === "string" ? payload.type : "";
    if (!(LINEAR_WEBHOOK_TYPES as readonly string[]).includes(type)) return c.json(ignored(deliveryId, type, `type ${type || "(none)"} is not one admission subscribes to`), 202);
    const [ticket] = linearTicketsOfDelivery(payload, { readyLabel: project.readyState ? null : project.readyLabel, readyState: project.readyState ?? null });
    if (!ticket) return c.json(ignored(deliveryId, type, "the payload names no issue"), 202);
    const number = numberInTeam(project, ticket);
    if (number === null) return c.json(ignored(deliveryId, type, `the issue ${ticket.identifier ?? ticket.issueId} is not of the project's Linear team`), 202);
    const action = typeof payload.action === "string" ? payload.action : "";
    // The issue as Linear states it now is read by admission: a delivery's data is not judged by.
    const message: AutopilotMessage = { kind: "autopilot.delivery", project_id: project.id, number, delivery_id: deliveryId, event: type, action, sender: ticket.sender, issue: null };
    await c.env.AUTOPILOT.send(message);
    log("autopilot.webhook_queued", { project: project.id, delivery: deliveryId, event: type, action, number, reason: "signed Linear delivery handed to admission" });
    return c.json({ delivery_id: deliveryId, event: type, queued: true, ignored_reason: null } satisfies WebhookAccepted, 202);
  },
);
