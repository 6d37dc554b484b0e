// Human readiness (../shared/spec/run-lifecycle.md, "Human readiness authorization"): a new
// readiness generation needs an attributable human ready transition. The webhook's sender must be
// a person, and because an app acting with a person's token also arrives as a User, the
// transition itself is confirmed from the tracker's record of who added the ready label (GitHub's
// issue timeline: the `labeled` event's actor and performed_via_github_app), which is also the
// only evidence reconciliation has. Known automation, unknown attribution and a label without a
// recorded transition are refused; the trusted-actor assumption, when a deployment turns it on,
// is named as such in the answer instead of claiming a person (docs/autopilot.md).
// Linear is judged by the same rule (../shared/spec/run-lifecycle.md: "where a tracker cannot
// distinguish human activity from user-token automation, require a documented trusted-actor
// deployment assumption"): its issue history's actor and botActor say who added the ready label
// or moved the issue to the ready state, an app's own user or a bot is refused, and a change made
// with a person's API key looks like that person (src/autopilot/linear/actors.ts).

import type { AutopilotProject } from "./projects";
import type { ActorEvidence, ReadyTransition } from "./provider";

export type ReadinessPolicy = Pick<AutopilotProject, "readyLabel" | "automationAccounts" | "trustedActorAssumption"> &
  Partial<Pick<AutopilotProject, "provider" | "readyState">>;

export interface ReadinessEvidence {
  /** Who sent the webhook delivery; absent when reconciliation looks at a snapshot. */
  sender?: ActorEvidence | null;
  /** The tracker's record of the latest addition of the ready label; null when it records none. */
  transition: ReadyTransition | null;
}

export type Readiness =
  | { ok: true; basis: "human" | "trusted_actor_assumption"; actor: string }
  | { ok: false; reason: string };

/** An actor as GitHub describes one (a webhook's `sender`, a timeline event's `actor` and `performed_via_github_app`). */
export function actorFromGitHub(user: { login: string; type: string } | null | undefined, app?: { slug?: string | null; name?: string | null } | null): ActorEvidence | null {
  if (!user) return null;
  return { login: user.login, type: user.type, viaApp: app ? (app.slug ?? app.name ?? "an app") : null };
}

/** The tracker and the ready marker in words: GitHub's ready label, or Linear's label or workflow state. */
function markerWords(policy: ReadinessPolicy): { tracker: string; marker: string; added: string } {
  const tracker = policy.provider === "linear" ? "Linear" : "GitHub";
  if (policy.readyState) return { tracker, marker: `the ready state "${policy.readyState}"`, added: "moved the issue to" };
  return { tracker, marker: `the ready label "${policy.readyLabel}"`, added: "added" };
}

/** Why this actor is not taken for a person, or null when nothing says it is automation. */
function automationReason(policy: ReadinessPolicy, actor: ActorEvidence, role: string): string | null {
  if (actor.type !== "User") return `${role} ${actor.login}, an account of type ${actor.type}, not a person`;
  if (/\[bot\]$/i.test(actor.login)) return `${role} ${actor.login}, a bot account, not a person`;
  if (policy.automationAccounts.some((a) => a.toLowerCase() === actor.login.toLowerCase())) {
    return `${role} ${actor.login}, one of the project's automation accounts`;
  }
  if (actor.viaApp) return `${role} ${actor.login} through the app ${actor.viaApp}, which is automation acting for them, not the person`;
  return null;
}

function noTransitionReason(policy: ReadinessPolicy, tracker: string, marker: string): string {
  if (policy.readyState) {
    return `${tracker} records no move of this issue to ${marker}, so no person can be named for it; an issue already there does not count: move it out and back again`;
  }
  return `${tracker} records no addition of ${marker} to this issue, so no person can be named for it; a label already present does not count: remove it and add it again`;
}

/**
 * Whether the latest ready transition is attributable to a person. Every refusal says why, in
 * words for the people watching the issue.
 */
export function checkHumanReadiness(policy: ReadinessPolicy, evidence: ReadinessEvidence): Readiness {
  const { tracker, marker, added } = markerWords(policy);
  const sender = evidence.sender ?? null;
  if (sender) {
    const why = automationReason(policy, sender, "the change was sent by");
    if (why) return { ok: false, reason: `${why}; only a person's ${policy.readyState ? "ready state" : "ready label"} admits an issue` };
  }
  const transition = evidence.transition;
  if (!transition) {
    if (sender && policy.trustedActorAssumption) return { ok: true, basis: "trusted_actor_assumption", actor: sender.login };
    return { ok: false, reason: noTransitionReason(policy, tracker, marker) };
  }
  if (!transition.actor) {
    return { ok: false, reason: `${tracker} does not say who ${added} ${marker} (event ${transition.eventId}); an unknown actor is not taken for a person` };
  }
  const why = automationReason(policy, transition.actor, policy.readyState ? `the move to ${marker} was made by` : `${marker} was added by`);
  if (why) return { ok: false, reason: `${why}; a person must ${policy.readyState ? "make it" : "add it"}` };
  return { ok: true, basis: "human", actor: transition.actor.login };
}
