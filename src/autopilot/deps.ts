// What admission needs from the rest of autopilot, as one replaceable set: the project store, the
// tracker provider factory, and the pure eligibility and readiness rules
// (../shared/spec/run-lifecycle.md, "Admission", "Human readiness authorization"). Each door is
// handed the set for its env (src/autopilot/wiring.ts), never reads one installed at load; tests
// pass in-memory ones. Admission's own code never imports a tracker client, so a second tracker
// plugs in here.

import type { Config } from "../config";
import type { Env } from "../env";
import type { ActorEvidence, Blocker, IssueFacts, PublicationProvider, ReadyTransition, TicketRef, TrackerKind, TrackerProvider } from "./provider";

/** A project as admission reads it (the projects store's AutopilotProject, the fields admission uses). */
export interface AdmissionProject {
  id: string;
  orgId: string;
  /** The tracker's kind. */
  provider: TrackerKind;
  /** The code host's repository (owner/name); GitHub Issues' issues are its own. */
  repository: string;
  /**
   * Where the tracker's ticket numbers count (TicketRef.repository): the repository for GitHub
   * Issues, `<workspace>/<team>` for Linear; absent: the repository.
   */
  ticketScope?: string;
  /** The code host's web page of the repository (https://github.com/owner/name), where runs clone and push by default. */
  repositoryPage?: string;
  /** The ready marker: the ready label, or the ready workflow state's name when readyState is set. */
  readyLabel: string;
  /** Ready by this workflow state (Linear) instead of a label; absent or null: by label. */
  readyState?: string | null;
  /** The label a published run's ticket moves to (tracker delivery review_label). */
  reviewLabel: string;
  briefHeading: string;
  queueCapacity: number;
  run: { labels: string[]; priority: number; launch: { protocol?: string; command: string[]; image?: string | null; env?: Record<string, string> }; repositoryUrl?: string | null };
}

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
