// The one stand-in autopilot's Workers-pool tests use: GitHub itself. Inside the Workers runtime
// GitHub is not reachable, so the tracker is an in-memory TrackerProvider whose issues are built
// from the real payloads of @octokit/webhooks-examples (the issue, its labels, the sender of the
// labeled event); test/e2e/autopilot.test.mjs runs the real GitHub client against a fake GitHub
// server instead. Everything else is production code: projects are created through
// POST /v1/autopilot/projects and read back by the real store (src/autopilot/projects.ts, secrets
// encrypted), and the rules are the real ones (src/autopilot/{brief,eligibility,readiness}.ts).
// installRealAutopilotWithTracker() passes that set, with only the provider replaced, in the env
// the runtime hands every door (src/autopilot/wiring.ts, admissionDeps).

import examples from "@octokit/webhooks-examples";
import { env } from "cloudflare:workers";
import { parseAgentBrief } from "../../src/autopilot/brief";
import type { AdmissionDeps, AdmissionEnv } from "../../src/autopilot/deps";
import { checkEligibility } from "../../src/autopilot/eligibility";
import { listProjects, readProject, readWebhookProject, type AutopilotProject, type AutopilotSecrets } from "../../src/autopilot/projects";
import { checkHumanReadiness } from "../../src/autopilot/readiness";
import { call } from "./helpers";
import type { Blocker, CreatedPullRequest, Headroom, IssueFacts, PublicationProvider, PullRequestFacts, ReadyTransition, TicketRef, TrackerProvider } from "../../src/autopilot/provider";
import { handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { loadConfig } from "../../src/config";

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

  /** While set, reading an issue (`issue`) or its blockers (`blockers`) fails with it, as GitHub unreachable or refusing the App would. */
  readonly failReads: { issue: Error | null; blockers: Error | null } = { issue: null, blockers: null };

  async getIssue(ref: TicketRef) {
    if (this.failReads.issue) throw this.failReads.issue;
    return this.issues.get(ref.number)?.facts ?? null;
  }
  async listBlockers(ref: TicketRef) {
    if (this.failReads.blockers) throw this.failReads.blockers;
    return this.issues.get(ref.number)?.blockers ?? [];
  }
  async lastReadyTransition(ref: TicketRef) {
    return this.issues.get(ref.number)?.transition ?? null;
  }
  /** Comments on each issue, as the tracker stores them. */
  readonly comments = new Map<number, { id: string; url: string; body: string }[]>();
  /** The next n calls of each kind fail (as a GitHub outage would); `postLost` posts, then fails (the answer is lost). */
  readonly failNext = { post: 0, postLost: 0, find: 0, labels: 0 };
  readonly calls = { post: 0, find: 0, labels: 0 };
  private commentIds = 0;

  async postComment(ref: TicketRef, body: string) {
    this.calls.post += 1;
    if (this.failNext.post > 0 && this.failNext.post--) throw new Error("GitHub answered 502 (fake outage)");
    const comment = { id: String(++this.commentIds), url: `https://github.com/${ref.repository}/issues/${ref.number}#issuecomment-${this.commentIds}`, body };
    this.comments.set(ref.number, [...(this.comments.get(ref.number) ?? []), comment]);
    if (this.failNext.postLost > 0 && this.failNext.postLost--) throw new Error("the connection closed before GitHub's answer (fake)");
    return { id: comment.id, url: comment.url };
  }
  async findComment(ref: TicketRef, marker: string) {
    this.calls.find += 1;
    if (this.failNext.find > 0 && this.failNext.find--) throw new Error("GitHub answered 503 (fake outage)");
    const found = (this.comments.get(ref.number) ?? []).find((c) => c.body.includes(marker));
    return found ? { id: found.id, url: found.url } : null;
  }
  async moveLabels(ref: TicketRef, labels: { remove: string[]; add: string[] }) {
    this.calls.labels += 1;
    if (this.failNext.labels > 0 && this.failNext.labels--) throw new Error("GitHub answered 502 (fake outage)");
    const issue = this.issues.get(ref.number);
    if (!issue) throw new Error(`no issue ${ref.number}`);
    issue.facts.labels = [...issue.facts.labels.filter((l) => !labels.remove.includes(l)), ...labels.add.filter((l) => !issue.facts.labels.includes(l))];
  }

  /** The installation's request budget as GitHub would state it; null: not stated yet. */
  headroomNow: Headroom | null = null;
  async headroom() {
    return this.headroomNow;
  }

  /** The `sinceMs` of each ready-list read, in order (null: a full pass's read of every ready issue). */
  readonly listedSince: (number | null)[] = [];

  async listReadyIssues(label: string, cursor: string | null, pageSize: number, sinceMs: number | null = null) {
    this.listedSince.push(sinceMs);
    const listed = (i: FakeIssue) => i.facts.state === "open" && i.facts.labels.includes(label) && (sinceMs === null || i.facts.updatedAtMs >= sinceMs);
    const ready = [...this.issues.values()].filter(listed).sort((a, b) => a.facts.ref.number - b.facts.ref.number);
    const start = cursor === null ? 0 : Number(cursor);
    const issues = ready.slice(start, start + pageSize).map((i) => i.facts);
    return { issues, cursor: start + pageSize < ready.length ? String(start + pageSize) : null };
  }
}

let transitions = 0;

/** An issue body with a valid Agent Brief under the default heading (docs/autopilot.md, "The Agent Brief"). */
export function briefBody(text = "It looks like you accidently spelled 'commit' with two 't's."): string {
  return [text, "", "## Agent Brief", "", "goal: fix the spelling of 'commit' in the README", "acceptance:", "- the README says 'commit'", "scope:", "- README.md", ""].join("\n");
}

export type RealProject = AutopilotProject & { secrets: AutopilotSecrets };

export const WEBHOOK_SECRET = "It's a Secret to Everybody";
// A PEM-shaped key: the project store checks its form; the in-memory tracker never signs with it.
export const PRIVATE_KEY = ["-----BEGIN RSA PRIVATE KEY-----", "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu", "-----END RSA PRIVATE KEY-----", ""].join("\n");

/**
 * Creates a project as a user would (POST /v1/autopilot/projects with `admin`'s token) and reads it
 * back through the real store. Defaults fit the example payloads: Codertocat/Hello-World, whose
 * issues.labeled adds the label "bug".
 */
export async function createProject(admin: string, overrides: Record<string, unknown> = {}): Promise<RealProject> {
  const body = {
    name: "hello-world autopilot",
    repository: "Codertocat/Hello-World",
    ready_label: "bug",
    run: { launch: { command: ["node", "agent.mjs"] } },
    webhook_secret: WEBHOOK_SECRET,
    github: { app_id: "123456", installation_id: "7890123", private_key: PRIVATE_KEY },
    ...overrides,
  };
  const res = await call("POST", "/v1/autopilot/projects", { token: admin, body });
  if (res.status !== 201) throw new Error(`create project: ${res.status} ${JSON.stringify(res.body)}`);
  const project = await readProject(env, res.body.id);
  if (!project) throw new Error(`project ${res.body.id} not read back`);
  return project;
}

/**
 * The production admission deps (the D1 project store and the real rules) with only the tracker
 * replaced, one in-memory FakeTracker per project made on first use, carried by the test's env
 * (the env the Worker's handlers and Durable Objects are handed). Answers the deps
 * (for calls into handleDelivery and reconcileProject) and each project's tracker.
 */
export function installRealAutopilotWithTracker() {
  const trackers = new Map<string, FakeTracker>();
  const tracker = (projectId: string) => {
    if (!trackers.has(projectId)) trackers.set(projectId, new FakeTracker());
    return trackers.get(projectId)!;
  };
  const deps: AdmissionDeps<AutopilotProject, AutopilotSecrets> = {
    readProject,
    readWebhookProject,
    listProjects,
    provider: (project) => tracker(project.id),
    rules: { parseAgentBrief, checkEligibility, checkHumanReadiness },
  };
  (env as typeof env & AdmissionEnv).AUTOPILOT_ADMISSION = deps;
  return { deps, tracker };
}

/** The code host as publication sees it, with the faults a test injects. */
export class FakeHost implements PublicationProvider {
  readonly calls: string[] = [];
  readonly branches = new Map<string, string>();
  readonly pulls: (PullRequestFacts & { repository: string })[] = [];
  tokens = 0;
  /** What the next creations do: create and answer, create then fail (a lost answer), answer 422, or fail. */
  createMode: ("ok" | "crash_after_create" | "exists" | "fail")[] = [];
  failReads = false;
  /** How many more branch reads fail (a short outage), after which reads answer again. */
  failReadsNext = 0;

  async issuePushToken(repository: string) {
    this.calls.push(`token ${repository}`);
    this.tokens += 1;
    return { token: `ghs_secret_${this.tokens}`, expiresAtMs: Date.now() + 3_600_000 };
  }
  async branchHead(repository: string, branch: string) {
    this.calls.push(`head ${repository} ${branch}`);
    if (this.failReads || (this.failReadsNext > 0 && this.failReadsNext--)) throw new Error("GitHub answered 503");
    return this.branches.get(branch) ?? null;
  }
  async findPullRequest(repository: string, branch: string) {
    this.calls.push(`find ${repository} ${branch}`);
    return this.pulls.find((p) => p.repository === repository && p.branch === branch) ?? null;
  }
  async createPullRequest(repository: string, pr: { branch: string; title: string }): Promise<CreatedPullRequest> {
    this.calls.push(`create ${repository} ${pr.branch}`);
    const mode = this.createMode.shift() ?? "ok";
    if (mode === "fail") throw new Error("GitHub answered 502");
    const made = { repository, number: 100 + this.pulls.length, url: `https://github.com/${repository}/pull/${100 + this.pulls.length}`, branch: pr.branch, state: "open" as const };
    this.pulls.push(made);
    if (mode === "crash_after_create") throw new Error("the connection dropped before GitHub's answer");
    if (mode === "exists") return { exists: true };
    return { created: made };
  }
}

/**
 * An issue admitted as a person would have it: a fresh ready-labeled issue `number` of the example
 * payload, delivered to the real admission. Answers the admitted run's id.
 */
export async function admitReadyIssue(fake: ReturnType<typeof installRealAutopilotWithTracker>, projectId: string, number: number): Promise<string> {
  const answer = await deliverReadyIssue(fake, projectId, number);
  if (answer?.outcome !== "admitted" || !answer.runId) throw new Error(`issue ${number} not admitted: ${JSON.stringify(answer)}`);
  return answer.runId;
}

/** A fresh ready-labeled issue `number` of the example payload, its labeled delivery handed to the real admission; answers what admission answered. */
export function deliverReadyIssue(fake: ReturnType<typeof installRealAutopilotWithTracker>, projectId: string, number: number) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = briefBody(payload.issue.body);
  fake.tracker(projectId).fromPayload(payload);
  const message: AutopilotMessage = {
    kind: "autopilot.delivery",
    project_id: projectId,
    number,
    delivery_id: crypto.randomUUID(),
    event: "issues",
    action: "labeled",
    sender: { login: payload.sender.login, type: payload.sender.type, viaApp: null },
  };
  return handleDelivery(env, loadConfig(env as unknown as Record<string, unknown>), fake.deps, message);
}
