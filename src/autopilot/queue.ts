// The AUTOPILOT queue: the webhook hands each accepted delivery here and answers GitHub at once;
// this consumer runs the admission path for it, for every message of a batch at once. Each message
// is acknowledged or retried on its own (QUEUE_RETRY_*), and dead-lettered after the queue's
// max_retries (wrangler.toml).

import { loadConfig, type Config } from "../config";
import type { Env } from "../env";
import { log } from "../lib/log";
import { z } from "zod";
import { parseMessage, queueRetryDelaySeconds } from "../queue/messages";
import { admitTicket } from "./admission";
import { clearProjectError, recordProjectError } from "./last-error";
import type { AdmissionDeps } from "./deps";
import { admissionDeps } from "./wiring";
import type { ActorEvidence } from "./provider";
import type { SignedIssue } from "./webhook";

/** The queue's name (wrangler.toml): the Worker's queue handler dispatches on it. */
export const AUTOPILOT_QUEUE = "docket-autopilot";

/** What the webhook sends for an accepted delivery (src/routes/autopilot-admission.ts), parsed here by the same schema. */
export const AutopilotMessage = z.object({
  kind: z.literal("autopilot.delivery"),
  project_id: z.string().min(1),
  number: z.int().min(1),
  delivery_id: z.string().min(1),
  event: z.string(),
  action: z.string(),
  sender: z.object({ login: z.string(), type: z.string(), viaApp: z.string().nullable() }).nullable() satisfies z.ZodType<ActorEvidence | null>,
  /** The issue as the signed delivery stated it (src/autopilot/webhook.ts); absent or null: admission reads it. */
  issue: z
    .object({
      title: z.string(),
      body: z.string(),
      state: z.enum(["open", "closed"]),
      stateReason: z.string().nullable(),
      labels: z.array(z.string()),
      url: z.string(),
      updatedAtMs: z.number(),
    })
    .nullable()
    .optional() satisfies z.ZodType<SignedIssue | null | undefined>,
});
export type AutopilotMessage = z.infer<typeof AutopilotMessage>;

export async function consumeAutopilot(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const config = loadConfig(env);
  const deps = admissionDeps(env);
  // Side by side, not one after the other: a delivery whose GitHub does not answer takes its client's
  // retries (GITHUB_RETRIES, up to GITHUB_REQUEST_TIMEOUT_MS each), and would hold every delivery
  // behind it, another project's too. At most the queue's max_batch_size at once (wrangler.toml);
  // two deliveries of one issue still meet one after the other in its ticket.
  await Promise.all(batch.messages.map((message) => consumeOne(message, env, config, deps)));
}

async function consumeOne(message: Message<unknown>, env: Env, config: Config, deps: AdmissionDeps): Promise<void> {
  let body: AutopilotMessage | null = null;
  try {
    body = parseMessage(AutopilotMessage, message.body, "an autopilot delivery");
    const result = await handleDelivery(env, config, deps, body);
    message.ack();
    if (result) await clearProjectError(env.DB, body.project_id);
    log("autopilot.delivery_consumed", { delivery: body.delivery_id, project: body.project_id, ticket: result?.ticket ?? null, outcome: result?.outcome ?? "project_gone", run_id: result?.runId ?? null, reason: result?.reasons.join("; ") || "admission decided" });
  } catch (err) {
    const delaySeconds = queueRetryDelaySeconds(config, message.attempts);
    message.retry({ delaySeconds });
    log("autopilot.delivery_failed", { delivery: body?.delivery_id ?? null, project: body?.project_id ?? null, try: message.attempts, retry_in_s: delaySeconds, reason: String(err) });
    // GitHub was answered 202 long ago: the project is where the operator sees this failed.
    if (body) await recordProjectError(env.DB, body.project_id, "webhook", err, body.number, Date.now());
  }
}

/** One delivery through the admission path; null when its project no longer exists. */
export async function handleDelivery(env: Env, config: Config, deps: AdmissionDeps, body: AutopilotMessage) {
  const project = await deps.readProject(env, body.project_id);
  if (!project) return null;
  const provider = deps.provider(project, project.secrets, config, env);
  return admitTicket({ env, config, provider, rules: deps.rules }, project, body.number, { door: "webhook", deliveryId: body.delivery_id, sender: body.sender, signed: body.issue ?? null });
}
