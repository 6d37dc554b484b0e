// What admission needs from the rest of autopilot, as one replaceable set: the project store, the
// tracker provider factory, and the pure eligibility and readiness rules
// (../shared/spec/run-lifecycle.md, "Admission", "Human readiness authorization"). Each door is
// handed the set for its env (src/autopilot/wiring.ts), never reads one installed at load; tests
// pass in-memory ones. Admission's own code never imports a tracker client, so a second tracker
// plugs in here.

import type { Config } from "../config";
import type { Env } from "../env";
import type { AutopilotProject } from "./projects";
import type { ActorEvidence, Blocker, IssueFacts, PublicationProvider, ReadyTransition, TicketRef, TrackerProvider } from "./provider";

/**
 * A project as admission reads it: the fields of the projects store's AutopilotProject that
 * admission uses, the ones with a default there optional here (tests build only these).
 */
export type AdmissionProject = Pick<AutopilotProject, "id" | "orgId" | "provider" | "repository" | "readyLabel" | "reviewLabel" | "briefHeading" | "queueCapacity" | "run"> &
  Partial<Pick<AutopilotProject, "ticketScope" | "repositoryPage" | "readyState">>;

export interface AdmissionSecrets {
  webhookSecret: string;
}

export type BriefResult = { ok: true; brief: unknown } | { ok: false; errors: string[] };
export type EligibilityResult = { eligible: true; snapshot: unknown } | { eligible: false; reasons: string[] };
export type ReadinessResult = { ok: true; basis: "human" | "trusted_actor_assumption"; actor: string } | { ok: false; reason: string };

/** The ticket of the project's issue `number`, at the tracker. */
export function projectTicketRef(project: Pick<AdmissionProject, "provider" | "repository" | "ticketScope">, number: number): TicketRef {
  return { provider: project.provider, repository: project.ticketScope ?? project.repository, number };
}

/**
 * The issue's page for people: GitHub's issue page under the repository's page, or Linear's
 * (https://linear.app/<workspace>/issue/<TEAM>-<n>, from the ticket scope `<workspace>/<team>`).
 */
export function issuePage(project: Pick<AdmissionProject, "provider" | "repository" | "repositoryPage" | "ticketScope">, number: number): string {
  if (project.provider !== "linear") return `${project.repositoryPage ?? `https://github.com/${project.repository}`}/issues/${number}`;
  const [workspace, team] = (project.ticketScope ?? project.repository).split("/");
  return `https://linear.app/${workspace}/issue/${team}-${number}`;
}

/** What the tracker is asked about readiness (TrackerProvider): the ready state's name, or the ready label. */
export function readyMarker(project: Pick<AdmissionProject, "readyLabel" | "readyState">): string {
  return project.readyState ?? project.readyLabel;
}

/** The pure rules (src/autopilot/brief.ts, eligibility.ts, readiness.ts). */
export interface AdmissionRules<P extends AdmissionProject = AdmissionProject> {
  parseAgentBrief(body: string, heading: string): BriefResult;
  checkEligibility(project: P, issue: IssueFacts, blockers: Blocker[], brief: BriefResult): EligibilityResult;
  checkHumanReadiness(project: P, evidence: { sender?: ActorEvidence | null; transition: ReadyTransition | null }): ReadinessResult;
}

export interface AdmissionDeps<P extends AdmissionProject = AdmissionProject, S extends AdmissionSecrets = AdmissionSecrets> {
  readProject(env: Env, id: string): Promise<(P & { secrets: S }) | null>;
  /** The project with only its webhook secret decrypted: all the webhook reads before a signature is checked. */
  readWebhookProject(env: Env, id: string): Promise<{ project: P; webhookSecret: string } | null>;
  /** Projects in id order after `afterId` (null: from the first), at most `limit`: reconciliation's walk. */
  listProjects(env: Env, afterId: string | null, limit: number): Promise<P[]>;
  /** The project's tracker; with `env`, its traffic is recorded (and repeated reads kept) in the env's D1. */
  provider(project: P, secrets: S, config: Config, env?: Env): TrackerProvider;
  /** The code host publication pushes to and opens pull requests on; absent: publications wait. */
  publisher?(project: P, secrets: S, config: Config, env?: Env): PublicationProvider;
  rules: AdmissionRules<P>;
}

/**
 * The Worker's env as admission's doors read it: an env may bring its own set (a test's, with the
 * tracker replaced), which then replaces the real one (src/autopilot/wiring.ts, admissionDeps).
 */
export interface AdmissionEnv {
  // `any` so the real project type (with more fields) fits without a cast where a set is made.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  AUTOPILOT_ADMISSION?: AdmissionDeps<any, any>;
}
