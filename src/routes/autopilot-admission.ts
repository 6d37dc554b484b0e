// Autopilot admission over HTTP (docs/protocol.md, "Autopilot admission"): the GitHub webhook of a
// project (public, signed), an admin's reconcile request, and the list of a project's tickets.
// The webhook only verifies, reads which ticket a delivery names and hands it to the AUTOPILOT
// queue, so GitHub is answered well inside its 10 s; admission itself is src/autopilot/admission.ts.

import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { operation } from "../openapi/operation";
import { AutopilotProjectPath, AdmissionTicketPath, AutopilotTicketDetail, ListTicketsQuery, ReconcileResult, TicketPage, WebhookAccepted } from "../protocol/autopilot";
import { validate } from "../validate";
import { pageSize } from "../lib/pagination";
import { inProjectRepository, ticketStub } from "../autopilot/admission";
import { ticketKey } from "../autopilot/provider";
import { issuePage, projectTicketRef, type AdmissionDeps, type AdmissionProject } from "../autopilot/deps";
import { admissionDeps } from "../autopilot/wiring";
import { reconcileProject } from "../autopilot/reconcile";
import { GitHubError } from "../autopilot/github/errors";
import { recordProjectError } from "../autopilot/last-error";
import { listedTicket, listProjectTickets, runStates } from "../autopilot/ticket-list";
import { deliveryPayload, signatureValid, ticketOfDelivery, WEBHOOK_EVENTS } from "../autopilot/webhook";
import type { AutopilotMessage } from "../autopilot/queue";

/** The project, when it belongs to the caller's organization; another organization's is not_found. */
async function ownProject(env: AppEnv["Bindings"], id: string, orgId: string | null) {
  const project = await admissionDeps(env).readProject(env, id);
  if (!project || (orgId !== null && project.orgId !== orgId)) throw new DocketError("not_found", `no autopilot project ${id}`);
  return project;
}

/** GitHub's failure as the 502 an admin reads: why (`failure`: unavailable, timeout, unauthorized…) and GitHub's status, if it answered. */
function githubUnavailable(err: GitHubError): DocketError {
  return new DocketError("github_unavailable", `GitHub could not be read for this project: ${err.message}`, { failure: err.failure, github_status: err.status });
}

/** What every delivery that no project at its URL signed is answered: an unknown project is not told from a bad signature. */
const UNSIGNED = "X-Hub-Signature-256 is missing, malformed or does not sign this body with the webhook secret of the project at this URL";
/** Checked against for an unknown project, so that its answer takes the time a wrong signature's does. */
const NO_PROJECT_SECRET = "no project: a signature is checked all the same";

/**
 * The project at `id` when `signs(secret)` says its webhook secret signs the delivery; `unsigned`
 * otherwise. No such project, a secret that does not decrypt and a bad signature are the same 401
 * (the reason only in the log), and only the webhook secret is decrypted before the check
 * (src/autopilot/projects.ts, readWebhookProject). `accepts` narrows which projects this door serves:
 * another's is checked all the same and refused as unknown.
 */
export async function signedProject<T>(
  env: AppEnv["Bindings"],
  id: string,
  signs: (secret: string) => Promise<T | null>,
  unsigned: string,
  accepts: (project: AdmissionProject) => boolean,
): Promise<{ project: AdmissionProject; signed: T }> {
  const deps = admissionDeps(env);
  let found: Awaited<ReturnType<AdmissionDeps["readWebhookProject"]>> = null;
  try {
    found = await deps.readWebhookProject(env, id);
  } catch (err) {
    if (!(err instanceof DocketError && err.code === "autopilot_not_configured")) throw err;
    log("autopilot.webhook_secret_unreadable", { project: id, reason: err.message });
  }
  const served = found && accepts(found.project) ? found : null;
  const signed = await signs(served?.webhookSecret ?? NO_PROJECT_SECRET);
  if (!served || signed === null) throw new DocketError("unauthorized", unsigned);
  return { project: served.project, signed };
}

const githubSigned = async (env: AppEnv["Bindings"], id: string, body: string, signature: string | undefined) =>
  (await signedProject(env, id, async (secret) => ((await signatureValid(secret, body, signature)) ? true : null), UNSIGNED, (p) => p.provider === "github")).project;

export const ignored = (deliveryId: string, event: string, reason: string): WebhookAccepted => ({ delivery_id: deliveryId, event, queued: false, ignored_reason: reason });

export const autopilotAdmissionRoutes = new Hono<AppEnv>()
  .post(
    "/autopilot/projects/:id/webhook",
    operation({
      id: "receiveAutopilotWebhook",
      summary: "Receive a GitHub webhook delivery for an autopilot project",
      description:
        "Public; authenticated by X-Hub-Signature-256 over the raw body with the project's webhook secret. A missing, malformed or wrong signature and " +
        "an unknown project are the same 401. The payload is the JSON body (application/json) or its form field payload (application/x-www-form-urlencoded). " +
        "Subscribes to issues, issue_comment and issue_dependencies; other events are acknowledged and ignored. Answers 202 at once; " +
        "admission runs from a queue, and a repeated X-GitHub-Delivery admits nothing new.",
      tag: "Autopilot",
      auth: "none",
      responses: { 202: { description: "Accepted: handed to admission, or ignored with the reason.", schema: WebhookAccepted } },
      errors: ["unauthorized", "autopilot_not_configured"],
      headers: [
        { name: "X-Hub-Signature-256", description: "sha256=<hex HMAC of the raw body with the project's webhook secret>.", required: true },
        { name: "X-GitHub-Event", description: "The event name (issues, issue_comment, issue_dependencies, …).", required: true },
        { name: "X-GitHub-Delivery", description: "The delivery's id, the same on a redelivery: deduplicates it.", required: true },
      ],
    }),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const { id } = c.req.valid("param");
      const body = await c.req.text();
      const project = await githubSigned(c.env, id, body, c.req.header("X-Hub-Signature-256"));
      const deliveryId = c.req.header("X-GitHub-Delivery") ?? "";
      const event = c.req.header("X-GitHub-Event") ?? "";
      if (deliveryId === "" || deliveryId.length > 200) throw new DocketError("invalid_request", "header X-GitHub-Delivery: required, at most 200 characters", { field: "X-GitHub-Delivery" });
      if (!(WEBHOOK_EVENTS as readonly string[]).includes(event)) return c.json(ignored(deliveryId, event, `event ${event || "(none)"} is not one admission subscribes to`), 202);
      const ticket = ticketOfDelivery(event, deliveryPayload(body, c.req.header("Content-Type")), project.readyLabel, c.get("config").autopilotWebhookFactsMaxBytes);
      if (!ticket) return c.json(ignored(deliveryId, event, "the payload names no issue"), 202);
      if (!inProjectRepository(project, ticket.repository)) return c.json(ignored(deliveryId, event, `the issue is in ${ticket.repository}, not the project's repository ${project.repository}`), 202);
      const message: AutopilotMessage = { kind: "autopilot.delivery", project_id: project.id, number: ticket.number, delivery_id: deliveryId, event, action: ticket.action, sender: ticket.sender, issue: ticket.issue };
      await c.env.AUTOPILOT.send(message);
      log("autopilot.webhook_queued", { project: project.id, delivery: deliveryId, event, action: ticket.action, number: ticket.number, reason: "signed delivery handed to admission" });
      return c.json({ delivery_id: deliveryId, event, queued: true, ignored_reason: null } satisfies WebhookAccepted, 202);
    },
  )
  .post(
    "/autopilot/projects/:id/reconcile",
    operation({
      id: "reconcileAutopilotProject",
      summary: "Reconcile an autopilot project now",
      description:
        "One bounded step (AUTOPILOT_RECONCILE_BATCH tickets) of the project's reconciliation pass, from its persisted cursor: the same admission path " +
        "and policy as the webhook and the cron; it bypasses nothing.",
      tag: "Autopilot",
      auth: "admin",
      responses: { 200: { description: "What the step examined and decided.", schema: ReconcileResult } },
      errors: ["not_found", "autopilot_not_configured", "github_unavailable"],
    }),
    validate("param", AutopilotProjectPath),
    async (c) => {
      const { id } = c.req.valid("param");
      const project = await ownProject(c.env, id, c.get("caller").orgId);
      // A person waits for this answer: each GitHub request is tried once, within
      // GITHUB_REQUEST_TIMEOUT_MS, and the first failure is the answer; the cron's passes retry.
      const config = { ...c.get("config"), githubRetries: 0 };
      const summary = await reconcileProject(c.env, config, admissionDeps(c.env), project, config.autopilotReconcileBatch, "operator").catch(async (err: unknown) => {
        if (!(err instanceof GitHubError)) throw err;
        await recordProjectError(c.env.DB, project.id, "operator", err, null, Date.now());
        throw githubUnavailable(err);
      });
      return c.json({
        ...summary,
        results: summary.results.map((r) => ({ ticket: r.ticket, outcome: r.outcome, run_id: r.runId, reasons: r.reasons })),
      } satisfies ReconcileResult);
    },
  )
  .get(
    "/autopilot/projects/:id/tickets",
    operation({
      id: "listAutopilotTickets",
      summary: "List an autopilot project's tickets",
      description: "Each ticket admission has seen, most recently changed first: its admitted run, or why it has none (refusal reasons, a capacity wait, a lapse).",
      tag: "Autopilot",
      auth: "member",
      responses: { 200: { description: "A page of tickets.", schema: TicketPage } },
      errors: ["not_found", "autopilot_not_configured"],
    }),
    validate("param", AutopilotProjectPath),
    validate("query", ListTicketsQuery),
    async (c) => {
      const { id } = c.req.valid("param");
      const project = await ownProject(c.env, id, c.get("caller").orgId);
      const q = c.req.valid("query");
      const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
      const { kept, next } = await listProjectTickets(c.env.DB, project.id, { status: q.status, cursor: q.cursor, limit });
      const states = await runStates(c.env.DB, kept);
      return c.json({ tickets: kept.map((r) => listedTicket(r, states, project)), next_cursor: next });
    },
  )
  .get(
    "/autopilot/projects/:id/tickets/:number",
    operation({
      id: "getAutopilotTicket",
      summary: "Read one ticket of an autopilot project, with its history",
      description:
        "The issue's admission state and its history: each admission (with the human or the assumption it relied on), refusal, capacity wait and lapse, with reasons; and the last time its issue could not be read, and why.",
      tag: "Autopilot",
      auth: "member",
      responses: { 200: { description: "The ticket.", schema: AutopilotTicketDetail } },
      errors: ["not_found", "autopilot_not_configured"],
    }),
    validate("param", AdmissionTicketPath),
    async (c) => {
      const { id, number } = c.req.valid("param");
      const project = await ownProject(c.env, id, c.get("caller").orgId);
      const at = { projectId: project.id, ticketKey: ticketKey(projectTicketRef(project, number)) };
      const ticket = await ticketStub(c.env, at).read(at);
      if (!ticket || ticket.project_id !== project.id) throw new DocketError("not_found", `admission has not seen issue #${number} of this project`);
      return c.json({
        ticket: ticket.ticket_key,
        number,
        issue_url: issuePage(project, number),
        status: ticket.status,
        reasons: ticket.reasons,
        generation: ticket.generation,
        admitted_generation: ticket.admitted_generation,
        run_id: ticket.run_id,
        updated_at_ms: ticket.updated_at_ms,
        withdrawal: ticket.withdrawal,
        history: ticket.history.map((h) => ({ ...h, basis: h.basis as "human" | null })),
        last_error: ticket.last_error,
      });
    },
  );
