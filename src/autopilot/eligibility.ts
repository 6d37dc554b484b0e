// Eligibility (../shared/spec/run-lifecycle.md, "Admission"): an issue becomes a run only when it
// is in the project's repository (or Linear team), open, carries the ready label (or, where the
// project is ready by workflow state, is in that state), has a valid Agent Brief, and every
// blocker the tracker reports is done under the project's status mapping. Pure: the facts come in,
// every reason that fails comes out (not just the first), and an eligible issue carries the
// snapshot admission stores with the run and the pre-claim recheck compares against.

import type { AgentBrief, BriefResult } from "./brief";
import type { AutopilotProject } from "./projects";
import { ticketKey, ticketName, type Blocker, type IssueFacts } from "./provider";

export type EligibilityPolicy = Pick<AutopilotProject, "provider" | "repository" | "readyLabel" | "doneStates" | "doneLabels"> &
  Partial<Pick<AutopilotProject, "ticketScope" | "readyState">>;

/** A blocker as it stood when eligibility was decided. */
export interface BlockerSnapshot {
  /** Provider-qualified identity: github:owner/repo#12. */
  ticket: string;
  done: boolean;
  /** "open" or "closed", or "unreadable" when the installation could not read it. */
  state: "open" | "closed" | "unreadable";
  stateReason: string | null;
  labels: string[];
  /** Why it counts as done or not, for people. */
  why: string;
}

/** What admission stores with the run: the facts it was admitted on. */
export interface EligibilitySnapshot {
  ticket: string;
  issue: {
    repository: string;
    number: number;
    title: string;
    url: string;
    state: "open" | "closed";
    stateReason: string | null;
    labels: string[];
    updatedAtMs: number;
  };
  brief: AgentBrief;
  blockers: BlockerSnapshot[];
  evaluatedAtMs: number;
}

export type Eligibility = { eligible: true; snapshot: EligibilitySnapshot } | { eligible: false; reasons: string[] };

const sameName = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
const hasLabel = (labels: readonly string[], label: string) => labels.some((l) => sameName(l, label));
const shortRef = (b: Blocker) => ticketName(b.ref);

/** Whether one blocker is done under the status mapping, and why, in words for people. */
export function blockerState(policy: Pick<EligibilityPolicy, "doneStates" | "doneLabels">, blocker: Blocker): BlockerSnapshot {
  const ticket = ticketKey(blocker.ref);
  const facts = blocker.facts;
  if (!facts) {
    const why = `blocked by ${shortRef(blocker)}, which Docket cannot read (${blocker.unreadable ?? "no reason given"}), so it does not count as done`;
    return { ticket, done: false, state: "unreadable", stateReason: null, labels: [], why };
  }
  const base = { ticket, state: facts.state, stateReason: facts.stateReason, labels: facts.labels };
  const doneLabel = policy.doneLabels.find((label) => hasLabel(facts.labels, label));
  if (doneLabel) return { ...base, done: true, why: `${shortRef(blocker)} carries "${doneLabel}", a done label` };
  if (facts.state === "closed") {
    const reason = facts.stateReason ?? "without a reason";
    if (facts.stateReason && policy.doneStates.includes(facts.stateReason)) return { ...base, done: true, why: `${shortRef(blocker)} was closed as ${reason}` };
    const counted = policy.doneStates.length > 0 ? policy.doneStates.join(", ") : "none";
    return { ...base, done: false, why: `blocked by ${shortRef(blocker)}, closed as ${reason}, which does not count as done (done states: ${counted})` };
  }
  return { ...base, done: false, why: `blocked by ${shortRef(blocker)}, which is still open` };
}

/** Why the issue is not marked ready, or null: the ready label, or the ready workflow state where the project uses one. */
function readyMissing(policy: EligibilityPolicy, issue: IssueFacts): string | null {
  if (policy.readyState) {
    return sameName(issue.status ?? "", policy.readyState) ? null : `the issue is in the state "${issue.status ?? "unknown"}", not the ready state "${policy.readyState}"`;
  }
  return hasLabel(issue.labels, policy.readyLabel) ? null : `the issue does not carry the ready label "${policy.readyLabel}"`;
}

/**
 * Every reason the issue cannot be admitted now, or the snapshot of the facts it is admitted on.
 * `brief` is parseAgentBrief's answer for the issue's body.
 */
export function checkEligibility(policy: EligibilityPolicy, issue: IssueFacts, blockers: Blocker[], brief: BriefResult, nowMs = Date.now()): Eligibility {
  const reasons: string[] = [];
  const scope = policy.ticketScope ?? policy.repository;
  if (issue.ref.provider !== policy.provider || !sameName(issue.ref.repository, scope)) {
    reasons.push(`the issue is in ${issue.ref.provider}:${issue.ref.repository}, not in the project's repository ${policy.provider}:${scope}`);
  }
  if (issue.state !== "open") reasons.push(`the issue is closed${issue.stateReason ? ` (${issue.stateReason})` : ""}`);
  const notReady = readyMissing(policy, issue);
  if (notReady) reasons.push(notReady);
  if (!brief.ok) for (const error of brief.errors) reasons.push(`Agent Brief: ${error}`);
  const states = blockers.map((b) => blockerState(policy, b));
  for (const state of states) if (!state.done) reasons.push(state.why);

  if (reasons.length > 0 || !brief.ok) return { eligible: false, reasons };
  return {
    eligible: true,
    snapshot: {
      ticket: ticketKey(issue.ref),
      issue: {
        repository: issue.ref.repository,
        number: issue.ref.number,
        title: issue.title,
        url: issue.url,
        state: issue.state,
        stateReason: issue.stateReason,
        labels: issue.labels,
        updatedAtMs: issue.updatedAtMs,
      },
      brief: brief.brief,
      blockers: states,
      evaluatedAtMs: nowMs,
    },
  };
}
