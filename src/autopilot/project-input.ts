// From a create or change request to the stored project: the configured bounds the schemas cannot
// know (src/bounds.ts), the rules between fields, defaults, and the secrets encrypted.

import { atMost, checkLaunch } from "../bounds";
import { checkOutboundUrl, isLoopbackUrl } from "../lib/outbound-address";
import type { Config } from "../config";
import type { Env } from "../env";
import { DocketError } from "../errors";
import type { CreateAutopilotProjectBody, UpdateAutopilotProjectBody } from "../protocol/autopilot";
import { normalizeLabels } from "../run/labels";
import { launchSpec } from "../run/launch";
import { PROJECT_DEFAULTS, type AutopilotProjectRow, type RunTemplate } from "./projects";
import { encryptSecret } from "./secrets";
import { trackerColumns } from "./tracker-input";

type RunInput = { labels?: string[]; priority?: number; launch?: RunTemplate["launch"]; repository_url?: string | null };

/** Bounds from the deployment's configuration, each refusal naming its field. */
export function checkProjectBounds(
  config: Config,
  body: { queue_capacity?: number; done_labels?: string[]; run?: RunInput; github?: { api_url?: string }; tracker?: { kind: string; api_url?: string } },
): void {
  if (body.github?.api_url) checkApiUrl(config, "github.api_url", body.github.api_url);
  if (body.tracker?.kind === "linear" && body.tracker.api_url) checkApiUrl(config, "tracker.api_url", body.tracker.api_url);
  if (body.queue_capacity !== undefined) atMost("queue_capacity", body.queue_capacity, config.autopilotQueueCapacityMax, "waiting runs");
  atMost("done_labels", body.done_labels?.length ?? 0, config.labelsMax, "labels");
  atMost("run.labels", body.run?.labels?.length ?? 0, config.labelsMax, "labels");
  if (body.run?.launch) checkLaunch(config, body.run.launch, "run.launch");
}

/** A tracker's or code host's API root: https, or plain http to a loopback stand-in where the deployment allows loopback. */
function checkApiUrl(config: Config, field: string, text: string): void {
  if (new URL(text).protocol === "http:" && !isLoopbackUrl(new URL(text))) {
    throw new DocketError("invalid_request", `body ${field}: must be an https URL (http only on a loopback address)`, { field });
  }
  checkOutboundUrl(config, field, text);
}

/** Each value once, the first spelling kept; GitHub compares labels and logins without case. */
function uniqueIgnoringCase(values: readonly string[]): string[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    const key = v.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function runTemplate(run: RunInput & { launch: RunTemplate["launch"] }): RunTemplate {
  return {
    labels: normalizeLabels(run.labels ?? []),
    priority: run.priority ?? PROJECT_DEFAULTS.runPriority,
    launch: launchSpec(run.launch),
    repositoryUrl: run.repository_url ?? null,
  };
}

const apiUrl = (url: string) => url.replace(/\/+$/, "");

/** The ready label marks readiness and the review label a run's outcome: one label cannot be both. */
function checkDistinctLabels(ready: string, review: string): void {
  if (ready.toLowerCase() === review.toLowerCase()) {
    throw new DocketError("invalid_request", "body review_label: must differ from ready_label", { field: "review_label" });
  }
}

/** Policy columns of a new project, every default applied. */
export async function newProjectRow(
  env: Env,
  ids: { id: string; orgId: string; createdBy: string },
  body: CreateAutopilotProjectBody,
  nowMs: number,
): Promise<AutopilotProjectRow> {
  const readyLabel = body.ready_label ?? PROJECT_DEFAULTS.readyLabel;
  const reviewLabel = body.review_label ?? PROJECT_DEFAULTS.reviewLabel;
  checkDistinctLabels(readyLabel, reviewLabel);
  return {
    id: ids.id,
    orgId: ids.orgId,
    name: body.name,
    ...(await trackerColumns(env, ids.id, body, body.repository, null)),
    repository: body.repository,
    readyLabel,
    reviewLabel,
    briefHeading: body.brief_heading ?? PROJECT_DEFAULTS.briefHeading,
    doneStates: JSON.stringify([...new Set(body.done_states ?? PROJECT_DEFAULTS.doneStates)]),
    doneLabels: JSON.stringify(uniqueIgnoringCase(body.done_labels ?? [])),
    queueCapacity: body.queue_capacity ?? PROJECT_DEFAULTS.queueCapacity,
    automationAccounts: JSON.stringify(uniqueIgnoringCase(body.automation_accounts ?? [])),
    trustedActorAssumption: body.trusted_actor_assumption ?? PROJECT_DEFAULTS.trustedActorAssumption,
    githubApiUrl: apiUrl(body.github.api_url ?? PROJECT_DEFAULTS.githubApiUrl),
    appId: body.github.app_id,
    installationId: body.github.installation_id,
    run: JSON.stringify(runTemplate(body.run)),
    webhookSecretEnc: await encryptSecret(env, ids.id, "webhook_secret", body.webhook_secret),
    privateKeyEnc: await encryptSecret(env, ids.id, "private_key", body.github.private_key),
    createdBy: ids.createdBy,
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    lastError: null,
  };
}

/** The stored project with the change applied: fields left out keep their value; a secret sent replaces the stored one. */
export async function changedProjectRow(env: Env, row: AutopilotProjectRow, body: UpdateAutopilotProjectBody, nowMs: number): Promise<AutopilotProjectRow> {
  const readyLabel = body.ready_label ?? row.readyLabel;
  const reviewLabel = body.review_label ?? row.reviewLabel;
  checkDistinctLabels(readyLabel, reviewLabel);
  const run = JSON.parse(row.run) as RunTemplate;
  const github = body.github ?? {};
  return {
    ...row,
    name: body.name ?? row.name,
    ...(await trackerColumns(env, row.id, body, body.repository ?? row.repository, row)),
    repository: body.repository ?? row.repository,
    readyLabel,
    reviewLabel,
    briefHeading: body.brief_heading ?? row.briefHeading,
    doneStates: body.done_states ? JSON.stringify([...new Set(body.done_states)]) : row.doneStates,
    doneLabels: body.done_labels ? JSON.stringify(uniqueIgnoringCase(body.done_labels)) : row.doneLabels,
    queueCapacity: body.queue_capacity ?? row.queueCapacity,
    automationAccounts: body.automation_accounts ? JSON.stringify(uniqueIgnoringCase(body.automation_accounts)) : row.automationAccounts,
    trustedActorAssumption: body.trusted_actor_assumption ?? row.trustedActorAssumption,
    githubApiUrl: github.api_url ? apiUrl(github.api_url) : row.githubApiUrl,
    appId: github.app_id ?? row.appId,
    installationId: github.installation_id ?? row.installationId,
    run: body.run
      ? JSON.stringify(
          runTemplate({
            labels: body.run.labels ?? run.labels,
            priority: body.run.priority ?? run.priority,
            launch: body.run.launch ?? run.launch,
            repository_url: body.run.repository_url !== undefined ? body.run.repository_url : (run.repositoryUrl ?? null),
          }),
        )
      : row.run,
    webhookSecretEnc: body.webhook_secret !== undefined ? await encryptSecret(env, row.id, "webhook_secret", body.webhook_secret) : row.webhookSecretEnc,
    privateKeyEnc: github.private_key !== undefined ? await encryptSecret(env, row.id, "private_key", github.private_key) : row.privateKeyEnc,
    updatedAtMs: nowMs,
  };
}
