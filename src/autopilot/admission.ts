// The one admission path (../shared/spec/run-lifecycle.md, "Admission"): every door (the webhook's
// queue consumer, the cron's reconciliation, startup reconciliation, an operator's reconcile
// request) calls admitTicket with the same policy. It reads the tracker's facts here, in the
// Worker, applies the pure rules, and hands the result to the ticket's Durable Object, which
// serializes and decides. A manual reconcile bypasses nothing: it is this same call.

import type { Config } from "../config";
import type { Env } from "../env";
import type { DispatchInput } from "../run/dispatch";
import type { AdmissionDoor, ObservationAnswer, TicketAddress } from "./ticket-types";
import { projectTicketRef, readyMarker, type AdmissionProject, type AdmissionRules, type EligibilityResult, type ReadinessResult } from "./deps";
import { trackerError } from "./last-error";
import { ticketKey, ticketObjectName, type ActorEvidence, type Blocker, type IssueFacts, type ReadyTransition, type TicketRef, type TrackerProvider } from "./provider";
import type { SignedIssue } from "./webhook";

export interface AdmissionContext {
  door: AdmissionDoor;
  /** X-GitHub-Delivery, for the webhook door. */
  deliveryId: string | null;
  /** The webhook's sender, only when the event is the ready label's addition itself; else null. */
  sender: ActorEvidence | null;
  /** The issue as a signed webhook delivery stated it (src/autopilot/webhook.ts); null: read it. */
  signed?: SignedIssue | null;
}

/** What every admission of a project reads with: the Worker's env and config, the project's tracker, and the rules. */
export interface Admitter {
  env: Env;
  config: Config;
  provider: TrackerProvider;
  rules: AdmissionRules;
}

export interface AdmissionResult extends ObservationAnswer {
  ticket: string;
}

/** The Durable Object of one issue of one project (named by ticketObjectName). */
export function ticketStub(env: Env, at: TicketAddress) {
  return env.TICKET.get(env.TICKET.idFromName(ticketObjectName(at.projectId, at.ticketKey)));
}

/** Whether an issue of `repository` belongs to the project (GitHub names are case-insensitive). */
export function inProjectRepository(project: AdmissionProject, repository: string): boolean {
  return project.repository.toLowerCase() === repository.toLowerCase();
}

/**
 * Examines one issue of the project and lets its ticket admit, refuse, or withdraw. When that
 * fails (GitHub unreachable, the App refused, a blocker unreadable), the ticket keeps why until a
 * later read succeeds, and the door sees the error as before (it retries or counts a failure).
 */
export async function admitTicket(admitter: Admitter, project: AdmissionProject, number: number, ctx: AdmissionContext): Promise<AdmissionResult> {
  try {
    return await examineIssue(admitter, project, number, ctx);
  } catch (err) {
    const at = { projectId: project.id, ticketKey: ticketKey(projectTicketRef(project, number)) };
    await ticketStub(admitter.env, at).readFailed(at, trackerError(ctx.door, err, Date.now())).catch(() => undefined);
    throw err;
  }
}

async function examineIssue({ env, config, provider, rules }: Admitter, project: AdmissionProject, number: number, ctx: AdmissionContext): Promise<AdmissionResult> {
  const ref = projectTicketRef(project, number);
  const key = ticketKey(ref);
  const { facts, blockers, last } = await trackerFacts(provider, project, ref, ctx.signed ?? null);
  let eligibility: EligibilityResult;
  let evidence: Readiness = { transition: null, readiness: null };
  if (!facts) {
    eligibility = { eligible: false, reasons: ["the issue cannot be read (deleted, transferred, or not visible to the installation)"] };
  } else {
    evidence = readinessOf(project, rules, last, ctx);
    eligibility = rules.checkEligibility(project, facts, blockers, rules.parseAgentBrief(facts.body, project.briefHeading));
  }
  const { transition, readiness } = evidence;
  const answer = await ticketStub(env, { projectId: project.id, ticketKey: key }).observe({
    project: { id: project.id, orgId: project.orgId, queueCapacity: project.queueCapacity },
    ticketKey: key,
    number,
    door: ctx.door,
    deliveryId: ctx.deliveryId,
    facts,
    eligibility,
    transition,
    readiness,
    dispatch: facts ? runFor(project, facts, eligibility, config) : emptyDispatch(project),
  });
  return { ...answer, ticket: key };
}

interface TrackerFacts {
  facts: IssueFacts | null;
  blockers: Blocker[];
  last: ReadyTransition | null;
}

/**
 * The issue, its blockers and its last ready transition. A signed webhook delivery already states
 * the issue (../shared/spec/run-lifecycle.md, "Admission": the same facts, one read fewer), and is
 * taken as it is unless the issue's events, read beside its blockers, record a change of its labels
 * or state after it: a delivery late or out of order is not judged by, the issue is read instead.
 */
async function trackerFacts(provider: TrackerProvider, project: AdmissionProject, ref: TicketRef, signed: SignedIssue | null): Promise<TrackerFacts> {
  if (signed && provider.readyEvidence) {
    const [blockers, evidence] = await Promise.all([provider.listBlockers(ref), provider.readyEvidence(ref, readyMarker(project))]);
    const current = evidence.lastChangeAtMs === null || evidence.lastChangeAtMs <= signed.updatedAtMs;
    return { facts: current ? { ...signed, ref } : await provider.getIssue(ref), blockers, last: evidence.transition };
  }
  const facts = await provider.getIssue(ref);
  if (!facts) return { facts: null, blockers: [], last: null };
  const [blockers, last] = await Promise.all([provider.listBlockers(ref), provider.lastReadyTransition(ref, readyMarker(project))]);
  return { facts, blockers, last };
}

/**
 * Records that the issue waits for a place in the project's full queue, without reading it
 * (src/autopilot/reconcile-waiting.ts): its ticket keeps the wait and its reason.
 */
export async function recordCapacityWait(env: Env, project: AdmissionProject, number: number, door: AdmissionDoor, reason: string): Promise<AdmissionResult> {
  const key = ticketKey(projectTicketRef(project, number));
  const answer = await ticketStub(env, { projectId: project.id, ticketKey: key }).observe({
    project: { id: project.id, orgId: project.orgId, queueCapacity: project.queueCapacity },
    ticketKey: key,
    number,
    door,
    deliveryId: null,
    facts: null,
    eligibility: { eligible: false, reasons: [reason] },
    transition: null,
    readiness: null,
    dispatch: emptyDispatch(project),
    capacityWait: reason,
  });
  return { ...answer, ticket: key };
}

interface Readiness {
  transition: ReadyTransition | null;
  readiness: ReadinessResult | null;
}

/**
 * The ready transition and the rules' verdict on it. When the tracker records none, the webhook's
 * own labeled event is the only evidence: the rules refuse it (the refusal is kept with its
 * reason), unless the project's trusted-actor assumption accepts its User sender; that delivery is
 * then the transition, and so the readiness generation (docs/autopilot.md, "Human readiness").
 */
function readinessOf(project: AdmissionProject, rules: AdmissionRules, recorded: ReadyTransition | null, ctx: AdmissionContext): Readiness {
  if (recorded) return { transition: recorded, readiness: rules.checkHumanReadiness(project, { sender: ctx.sender, transition: recorded }) };
  if (!ctx.sender) return { transition: null, readiness: null };
  const readiness = rules.checkHumanReadiness(project, { sender: ctx.sender, transition: null });
  if (!readiness.ok || ctx.deliveryId === null) return { transition: null, readiness };
  return { transition: { eventId: `delivery:${ctx.deliveryId}`, atMs: Date.now(), actor: ctx.sender }, readiness };
}

/** The run an admitted issue becomes: the project's run template, the issue as its brief, the eligibility facts snapshotted. */
export function runFor(project: AdmissionProject, facts: IssueFacts, eligibility: EligibilityResult, config: Config): DispatchInput {
  const brief = `${facts.title}\n\n${facts.body}`.slice(0, config.briefMaxChars);
  const repositoryUrl = project.run.repositoryUrl ?? repositoryPage(project, facts);
  return {
    brief: brief.trim() === "" ? facts.url : brief,
    repository: { url: repositoryUrl },
    labels: project.run.labels,
    priority: project.run.priority,
    launch: project.run.launch,
    metadata: {
      autopilot_project: project.id,
      autopilot_ticket: ticketKey(facts.ref),
      issue_url: facts.url,
      autopilot_eligibility: JSON.stringify(eligibility.eligible ? eligibility.snapshot ?? null : null),
    },
  };
}

/**
 * The code host's page of the repository, where runners clone and push by default: an issue of
 * the repository itself (GitHub Issues) says it; a ticket of another tracker (Linear) does not,
 * and the project's code host names it.
 */
function repositoryPage(project: AdmissionProject, facts: IssueFacts): string {
  const ownIssues = (project.ticketScope ?? project.repository) === project.repository;
  if (ownIssues || !project.repositoryPage) return facts.url.replace(/\/issues\/\d+$/, "");
  return project.repositoryPage;
}

function emptyDispatch(project: AdmissionProject): DispatchInput {
  return { brief: "unreadable issue", labels: project.run.labels, launch: project.run.launch };
}
