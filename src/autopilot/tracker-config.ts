// A project's tracker, apart from its code host (../shared/spec/run-lifecycle.md, "Admission":
// "provider-resolved blocking dependencies", "configured status mapping"). GitHub Issues reads the
// project's own repository through its GitHub App; a Linear team (optionally one Linear project of
// it) is read through Linear's GraphQL API with the project's API key, and its runs' branches and
// pull requests still go to the GitHub repository. Stored as JSON in autopilot_projects.tracker.

import type { AutopilotProjectAnswer } from "../protocol/autopilot";

export interface GitHubTracker {
  kind: "github";
}

export interface LinearTracker {
  kind: "linear";
  /** Linear's GraphQL endpoint (a stand-in's in tests). */
  apiUrl: string;
  /** The workspace's URL key (linear.app/<workspace>/…): the first part of a ticket key. */
  workspace: string;
  /** The team's key, as its issue identifiers start (ENG in ENG-12). */
  team: string;
  /** Only issues of this Linear project (its id), or null: the whole team. */
  project: string | null;
  /** Ready is this label on the issue, or (readyLabel null) the issue in readyState. */
  readyLabel: string | null;
  readyState: string | null;
  /** The workflow state a published run's issue moves to. */
  reviewState: string;
  /** Workflow states (by name) that count a blocker as done besides those of type completed. */
  doneStates: string[];
  /** Linear users (by display name, as the history names them) never taken for a person. */
  automationAccounts: string[];
}

export type TrackerConfig = GitHubTracker | LinearTracker;

export const LINEAR_DEFAULTS = {
  apiUrl: "https://api.linear.app/graphql",
  readyLabel: "ready",
} as const;

export const GITHUB_TRACKER: GitHubTracker = { kind: "github" };

/** The stored JSON back into the settings; a row from before trackers were named is GitHub's. */
export function parseTracker(json: string | null | undefined): TrackerConfig {
  if (!json) return GITHUB_TRACKER;
  const parsed = JSON.parse(json) as TrackerConfig;
  return parsed.kind === "linear" ? parsed : GITHUB_TRACKER;
}

/** Where a Linear ticket's number counts (TicketRef.repository): `<workspace>/<team key>`. */
export function linearScope(tracker: Pick<LinearTracker, "workspace" | "team">): string {
  return `${tracker.workspace}/${tracker.team}`;
}

/**
 * What the project watches, lower-cased, one project of an organization each
 * (autopilot_projects_repository): the GitHub repository, or the Linear team (and project).
 */
export function watchedKey(repository: string, tracker: TrackerConfig): string {
  if (tracker.kind === "github") return repository.toLowerCase();
  return `${linearScope(tracker)}${tracker.project ? `/${tracker.project}` : ""}`.toLowerCase();
}

/** The same, in words, for a refusal that names the project already watching it. */
export function watchedName(repository: string, tracker: TrackerConfig): string {
  if (tracker.kind === "github") return repository;
  return `the Linear team ${linearScope(tracker)}${tracker.project ? ` (project ${tracker.project})` : ""}`;
}

/** The project's ready marker, review marker and automation accounts as admission reads them. */
export function trackerPolicy(tracker: TrackerConfig, row: { readyLabel: string; reviewLabel: string; automationAccounts: string[] }) {
  if (tracker.kind === "github") return { readyLabel: row.readyLabel, readyState: null, reviewLabel: row.reviewLabel, automationAccounts: row.automationAccounts };
  return {
    readyLabel: tracker.readyLabel ?? tracker.readyState ?? LINEAR_DEFAULTS.readyLabel,
    readyState: tracker.readyLabel === null ? tracker.readyState : null,
    reviewLabel: tracker.reviewState,
    automationAccounts: tracker.automationAccounts,
  };
}

/** The tracker as answers show it: the API key only as "set". */
export function trackerAnswer(tracker: TrackerConfig, tokenSet: boolean): AutopilotProjectAnswer["tracker"] {
  if (tracker.kind === "github") return { kind: "github" };
  return {
    kind: "linear",
    api_url: tracker.apiUrl,
    workspace: tracker.workspace,
    team: tracker.team,
    project: tracker.project,
    ready_label: tracker.readyLabel,
    ready_state: tracker.readyState,
    review_state: tracker.reviewState,
    done_states: tracker.doneStates,
    automation_accounts: tracker.automationAccounts,
    api_key_set: tokenSet,
  };
}
