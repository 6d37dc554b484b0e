// In-memory stand-ins for what admission asks of the rest of autopilot, for tests inside the
// Workers runtime (which cannot reach a real GitHub):
// - the tracker: an in-memory TrackerProvider whose issues are built from the real payloads of
//   @octokit/webhooks-examples (the issue, its labels, the sender of the labeled event);
// - the project store: projects held in memory;
// - the rules: minimal eligibility (open, in the repository, carries the ready label, every blocker
//   closed) and readiness (the transition's actor and the sender are Users, not `[bot]` logins or
//   automation accounts) checks, standing in for src/autopilot/{brief,eligibility,readiness}.ts.
// installFakeAutopilot() installs them where the Worker's doors look (src/autopilot/deps.ts).

import examples from "@octokit/webhooks-examples";
import type { AdmissionDeps, AdmissionProject, AdmissionRules, AdmissionSecrets } from "../../src/autopilot/deps";
import { installAdmissionDeps } from "../../src/autopilot/deps";
import type { Blocker, IssueFacts, ReadyTransition, TicketRef, TrackerProvider } from "../../src/autopilot/provider";

type Json = Record<string, any>;

/** A real example payload of `event`.`action` (the first one), deep-copied so a test may change it. */
export function example(event: string, action: string): Json {
  const group = (examples as unknown as { name: string; examples: Json[] }[]).find((e) => e.name === event);
  const payload = group?.examples.find((p) => p.action === action);
  if (!payload) throw new Error(`no example ${event}.${action}`);
  return structuredClone(payload);
}

/** `sha256=<hex HMAC-SHA256 of body with secret>`, as GitHub signs a delivery. */
export async function sign(secret: string, body: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(body)));
  return `sha256=${[...mac].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export interface FakeIssue {
  facts: IssueFacts;
  blockers: Blocker[];
  transition: ReadyTransition | null;
}

/** The tracker's view of a repository, changed by tests as a person would change GitHub. */
export class FakeTracker implements TrackerProvider {
  readonly issues = new Map<number, FakeIssue>();

  /** The issue of a real payload as the tracker reports it; a `labeled` payload is also its ready transition. */
  fromPayload(payload: Json, number = payload.issue.number as number): FakeIssue {
    const issue = payload.issue;
    const ref: TicketRef = { provider: "github", repository: payload.repository.full_name, number };
    const facts: IssueFacts = {
      ref,
      title: issue.title,
      body: issue.body ?? "",
      state: issue.state,
      stateReason: issue.state_reason ?? null,
      labels: (issue.labels ?? []).map((l: Json) => l.name),
      url: String(issue.html_url).replace(/\/issues\/\d+$/, `/issues/${number}`),
      updatedAtMs: Date.parse(issue.updated_at),
    };
    const transition: ReadyTransition | null =
      payload.action === "labeled"
        ? { eventId: `labeled-${issue.id}-${number}-${payload.label.name}-${++transitions}`, atMs: Date.parse(issue.updated_at), actor: { login: payload.sender.login, type: payload.sender.type, viaApp: null } }
        : null;
    const entry = { facts, blockers: [], transition };
    this.issues.set(number, entry);
    return entry;
  }

  async getIssue(ref: TicketRef) {
    return this.issues.get(ref.number)?.facts ?? null;
  }
  async listBlockers(ref: TicketRef) {
    return this.issues.get(ref.number)?.blockers ?? [];
  }
  async lastReadyTransition(ref: TicketRef) {
    return this.issues.get(ref.number)?.transition ?? null;
  }
  async listReadyIssues(label: string, cursor: string | null, pageSize: number) {
    const ready = [...this.issues.values()].filter((i) => i.facts.state === "open" && i.facts.labels.includes(label)).sort((a, b) => a.facts.ref.number - b.facts.ref.number);
    const start = cursor === null ? 0 : Number(cursor);
    const issues = ready.slice(start, start + pageSize).map((i) => i.facts);
    return { issues, cursor: start + pageSize < ready.length ? String(start + pageSize) : null };
  }
}

let transitions = 0;

const isBot = (login: string, type: string, automation: string[]) => type !== "User" || login.endsWith("[bot]") || automation.includes(login);

export const fakeRules: AdmissionRules = {
  parseAgentBrief: (body) => ({ ok: true, brief: body }),
  checkEligibility(project, issue, blockers) {
    const reasons: string[] = [];
    if (issue.ref.repository.toLowerCase() !== project.repository.toLowerCase()) reasons.push("the issue is not in the project's repository");
    if (issue.state !== "open") reasons.push(`the issue is closed (${issue.stateReason ?? "no reason"})`);
    if (!issue.labels.includes(project.readyLabel)) reasons.push(`the issue does not carry the ready label "${project.readyLabel}"`);
    for (const b of blockers) {
      if (!b.facts) reasons.push(`blocked by #${b.ref.number}, which the installation cannot read: ${b.unreadable}`);
      else if (b.facts.state === "open") reasons.push(`blocked by #${b.ref.number}, still open`);
    }
    return reasons.length === 0 ? { eligible: true, snapshot: { labels: issue.labels, blockers: blockers.map((b) => b.ref.number) } } : { eligible: false, reasons };
  },
  checkHumanReadiness(_project, { sender, transition }) {
    const automation: string[] = [];
    if (!transition?.actor) return { ok: false, reason: "the ready label's addition has no known actor" };
    if (sender && isBot(sender.login, sender.type, automation)) return { ok: false, reason: `the ready label was added by ${sender.login}, an automation account (${sender.type})` };
    if (isBot(transition.actor.login, transition.actor.type, automation)) return { ok: false, reason: `the ready label was added by ${transition.actor.login}, an automation account (${transition.actor.type})` };
    return { ok: true, basis: "human", actor: transition.actor.login };
  },
};

export type FakeProject = AdmissionProject & { secrets: AdmissionSecrets };

export function fakeProject(orgId: string, overrides: Partial<FakeProject> = {}): FakeProject {
  const hex = [...crypto.getRandomValues(new Uint8Array(12))].map((b) => b.toString(16).padStart(2, "0")).join("");
  return {
    id: `apj_${hex}`,
    orgId,
    provider: "github",
    repository: "Codertocat/Hello-World",
    // The label of the example issues.labeled payload.
    readyLabel: "bug",
    briefHeading: "Agent Brief",
    queueCapacity: 10,
    run: { labels: [], priority: 0, launch: { command: ["node", "agent.mjs"] } },
    secrets: { webhookSecret: "It's a Secret to Everybody" },
    ...overrides,
  };
}

/** Installs a project store and one tracker per project; answers both for the test to change. */
export function installFakeAutopilot() {
  const projects = new Map<string, FakeProject>();
  const trackers = new Map<string, FakeTracker>();
  const deps: AdmissionDeps<FakeProject, AdmissionSecrets> = {
    readProject: async (_env, id) => projects.get(id) ?? null,
    listProjects: async (_env, afterId, limit) => [...projects.values()].filter((p) => afterId === null || p.id > afterId).sort((a, b) => (a.id < b.id ? -1 : 1)).slice(0, limit),
    provider: (project) => trackers.get(project.id)!,
    rules: fakeRules,
  };
  installAdmissionDeps(deps);
  return {
    deps,
    add(project: FakeProject) {
      projects.set(project.id, project);
      const tracker = new FakeTracker();
      trackers.set(project.id, tracker);
      return tracker;
    },
    remove(id: string) {
      projects.delete(id);
    },
  };
}
