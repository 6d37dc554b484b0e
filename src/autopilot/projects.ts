// Autopilot projects as stored and as admission reads them (../shared/spec/run-lifecycle.md,
// "Admission"): the configuration in D1, the secrets encrypted (src/autopilot/secrets.ts), and the
// one view every answer shows, which never carries a secret.

import { and, asc, eq, gt } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { autopilotProjects } from "../db/autopilot-schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import type { AutopilotProjectAnswer } from "../protocol/autopilot";
import { launchSpec } from "../run/launch";
import type { TrackerKind } from "./provider";
import { decryptSecret } from "./secrets";
import { linearScope, parseTracker, trackerAnswer, trackerPolicy, type TrackerConfig } from "./tracker-config";

export type AutopilotProjectRow = typeof autopilotProjects.$inferSelect;

export interface RunTemplate {
  labels: string[];
  priority: number;
  launch: { protocol?: string; command: string[]; image?: string | null; env?: Record<string, string> };
  /** Where runners clone the repository and push a run's branch; absent: the repository page. */
  repositoryUrl?: string | null;
}

export interface AutopilotProject {
  id: string;
  orgId: string;
  name: string;
  /** The tracker's kind (tracker.kind). */
  provider: TrackerKind;
  /** owner/name: the GitHub repository runs push to and open pull requests on; GitHub Issues' issues too. */
  repository: string;
  tracker: TrackerConfig;
  /** Where the tracker's ticket numbers count (TicketRef.repository): the repository, or Linear's `<workspace>/<team>`. */
  ticketScope: string;
  /** The code host's web page of the repository (repositoryPage below). */
  repositoryPage: string;
  /** The ready marker: the ready label, or the ready workflow state's name when readyState is set. */
  readyLabel: string;
  /** Ready by workflow state (Linear), else null: ready by label. */
  readyState: string | null;
  /** The review marker: GitHub's review label, Linear's review workflow state. */
  reviewLabel: string;
  /** The issue body's "## <briefHeading>" section holds the Agent Brief (src/autopilot/brief.ts). */
  briefHeading: string;
  /** Closed state reasons that count a blocker as done. */
  doneStates: string[];
  /** Labels that count a blocker as done even while open. */
  doneLabels: string[];
  /** Admitted waiting runs at most. */
  queueCapacity: number;
  /** Logins never taken for a human. */
  automationAccounts: string[];
  trustedActorAssumption: boolean;
  githubApiUrl: string;
  appId: string;
  installationId: string;
  run: RunTemplate;
  createdAtMs: number;
  updatedAtMs: number;
}

export interface AutopilotSecrets {
  webhookSecret: string;
  privateKey: string;
  /** The tracker's own API credential (Linear's API key); absent for GitHub Issues, which the App's key reads. */
  trackerToken?: string;
}

/** What a project gets when its creator leaves a field out (docs/autopilot.md). */
export const PROJECT_DEFAULTS = {
  readyLabel: "ready",
  reviewLabel: "needs-review",
  briefHeading: "Agent Brief",
  doneStates: ["completed"],
  doneLabels: [] as string[],
  queueCapacity: 10,
  automationAccounts: [] as string[],
  trustedActorAssumption: false,
  githubApiUrl: "https://api.github.com",
  runPriority: 0,
} as const;

export function projectFromRow(row: AutopilotProjectRow): AutopilotProject {
  const tracker = parseTracker(row.tracker);
  const policy = trackerPolicy(tracker, { readyLabel: row.readyLabel, reviewLabel: row.reviewLabel, automationAccounts: JSON.parse(row.automationAccounts) as string[] });
  return {
    id: row.id,
    orgId: row.orgId,
    name: row.name,
    provider: tracker.kind,
    repository: row.repository,
    tracker,
    ticketScope: tracker.kind === "linear" ? linearScope(tracker) : row.repository,
    repositoryPage: repositoryPage(row.githubApiUrl, row.repository),
    ...policy,
    briefHeading: row.briefHeading,
    doneStates: JSON.parse(row.doneStates) as string[],
    doneLabels: JSON.parse(row.doneLabels) as string[],
    queueCapacity: row.queueCapacity,
    trustedActorAssumption: row.trustedActorAssumption,
    githubApiUrl: row.githubApiUrl,
    appId: row.appId,
    installationId: row.installationId,
    run: JSON.parse(row.run) as RunTemplate,
    createdAtMs: row.createdAtMs,
    updatedAtMs: row.updatedAtMs,
  };
}

/**
 * The repository's web page from GitHub's API root: api.github.com's is on github.com, a GitHub
 * Enterprise Server's API (…/api/v3) on its host; a stand-in serves both from one root.
 */
export function repositoryPage(apiUrl: string, repository: string): string {
  const root = apiUrl === "https://api.github.com" ? "https://github.com" : apiUrl.replace(/\/api\/v3$/, "");
  return `${root}/${repository}`;
}

/** Where the tracker delivers a project's webhooks, on the deployment the request reached: GitHub's door, or Linear's (src/routes/autopilot-linear.ts). */
export function webhookUrl(origin: string, projectId: string, provider: TrackerKind): string {
  return `${origin}/v1/autopilot/projects/${projectId}/${provider === "linear" ? "linear/webhook" : "webhook"}`;
}

/** The project as every answer shows it: secrets only as "set", never their values. */
export function projectAnswer(row: AutopilotProjectRow, origin: string): AutopilotProjectAnswer {
  const p = projectFromRow(row);
  return {
    id: p.id,
    org_id: p.orgId,
    name: p.name,
    provider: p.provider,
    tracker: trackerAnswer(p.tracker, row.trackerTokenEnc !== ""),
    repository: p.repository,
    ready_label: p.readyLabel,
    review_label: p.reviewLabel,
    brief_heading: p.briefHeading,
    done_states: p.doneStates as AutopilotProjectAnswer["done_states"],
    done_labels: p.doneLabels,
    queue_capacity: p.queueCapacity,
    automation_accounts: p.automationAccounts,
    trusted_actor_assumption: p.trustedActorAssumption,
    run: {
      labels: p.run.labels,
      priority: p.run.priority,
      launch: launchSpec(p.run.launch),
      repository_url: p.run.repositoryUrl ?? null,
    },
    webhook: { url: webhookUrl(origin, p.id, p.provider), secret_set: row.webhookSecretEnc !== "" },
    github: { api_url: p.githubApiUrl, app_id: p.appId, installation_id: p.installationId, private_key_set: row.privateKeyEnc !== "" },
    created_at_ms: p.createdAtMs,
    updated_at_ms: p.updatedAtMs,
  };
}

/** The organization's project, or 404 not_found (another organization's project is not found either). */
export async function loadProjectRow(db: D1Database, orgId: string, id: string): Promise<AutopilotProjectRow> {
  const row = await drizzle(db)
    .select()
    .from(autopilotProjects)
    .where(and(eq(autopilotProjects.orgId, orgId), eq(autopilotProjects.id, id)))
    .get();
  if (!row) throw new DocketError("not_found", `no autopilot project ${id} in this organization`);
  return row;
}

/**
 * A project's configuration and its secrets in clear, for admission and the tracker client; null
 * when there is no such project. A secret that does not decrypt is autopilot_not_configured.
 */
export async function readProject(env: Env, id: string): Promise<(AutopilotProject & { secrets: AutopilotSecrets }) | null> {
  const row = await projectRow(env, id);
  if (!row) return null;
  const secrets: AutopilotSecrets = {
    webhookSecret: await decryptSecret(env, row.id, "webhook_secret", row.webhookSecretEnc),
    privateKey: await decryptSecret(env, row.id, "private_key", row.privateKeyEnc),
  };
  if (row.trackerTokenEnc !== "") secrets.trackerToken = await decryptSecret(env, row.id, "tracker_token", row.trackerTokenEnc);
  return { ...projectFromRow(row), secrets };
}

/**
 * A project's configuration with only its webhook secret in clear: what the webhook decrypts
 * before a delivery's signature is checked, so an unsigned request never has the App's private
 * key decrypted. Null when there is no such project.
 */
export async function readWebhookProject(env: Env, id: string): Promise<{ project: AutopilotProject; webhookSecret: string } | null> {
  const row = await projectRow(env, id);
  if (!row) return null;
  return { project: projectFromRow(row), webhookSecret: await decryptSecret(env, row.id, "webhook_secret", row.webhookSecretEnc) };
}

async function projectRow(env: Env, id: string): Promise<AutopilotProjectRow | undefined> {
  return drizzle(env.DB).select().from(autopilotProjects).where(eq(autopilotProjects.id, id)).get();
}

/** Projects in id order after `afterId` (null: from the first), at most `limit`: reconciliation's walk over every organization's projects. */
export async function listProjects(env: Env, afterId: string | null, limit: number): Promise<AutopilotProject[]> {
  const rows = await drizzle(env.DB)
    .select()
    .from(autopilotProjects)
    .where(afterId === null ? undefined : gt(autopilotProjects.id, afterId))
    .orderBy(asc(autopilotProjects.id))
    .limit(limit);
  return rows.map(projectFromRow);
}
