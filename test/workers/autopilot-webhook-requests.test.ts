// What the webhook door costs on GitHub (docs/autopilot.md, "What Docket reads"): a signed delivery
// states the issue, so admission reads only what it does not state (the issue's blockers and its
// events) and the installation token. Everything is production code, the GitHub provider and its
// Octokit client included; GitHub is a fetch answered in-process that keeps every request it was
// sent, as the installation's rate limit would count them (nothing here answers 304).

import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAgentBrief } from "../../src/autopilot/brief";
import type { AdmissionDeps, AdmissionEnv } from "../../src/autopilot/deps";
import { checkEligibility } from "../../src/autopilot/eligibility";
import { githubProvider } from "../../src/autopilot/github/provider";
import { listProjects, readProject, readWebhookProject, type AutopilotProject, type AutopilotSecrets } from "../../src/autopilot/projects";
import { checkHumanReadiness } from "../../src/autopilot/readiness";
import { ticketOfDelivery } from "../../src/autopilot/webhook";
import { appKeyPair } from "./app-key";
import { briefBody, createProject, sign, WEBHOOK_SECRET } from "./autopilot-fakes";
import { call, createOrg } from "./helpers";

const API = "https://github.example.test/api/v3";
const REPO = "acme/app";
const PERSON = { login: "octocat", type: "User" };

interface Issue {
  number: number;
  title: string;
  body: string;
  state: "open" | "closed";
  labels: string[];
  updatedAtMs: number;
  /** The issue's events, oldest first: what changed its labels or state, when and by whom. */
  events: { id: number; event: string; label: string | null; atMs: number }[];
}

/** GitHub as the provider sees it: the App's installation token, issues, blockers and events. */
class GitHubStandIn {
  readonly issues = new Map<number, Issue>();
  /** Every request, as "METHOD /path" below the API root. */
  readonly requests: string[] = [];

  readonly fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const path = new URL(request.url).pathname.replace("/api/v3", "");
    this.requests.push(`${request.method} ${path}`);
    if (path.endsWith("/access_tokens")) return Response.json({ token: "ghs_door", expires_at: new Date(Date.now() + 3_600_000).toISOString() }, { status: 201 });
    const match = /^\/repos\/acme\/app\/issues\/(\d+)(\/dependencies\/blocked_by|\/events)?$/.exec(path);
    const issue = match ? this.issues.get(Number(match[1])) : undefined;
    if (!issue) return Response.json({ message: "Not Found" }, { status: 404 });
    if (match![2] === "/dependencies/blocked_by") return Response.json([]);
    if (match![2] === "/events") return Response.json(issue.events.map((e) => eventJson(e)));
    return Response.json(issueJson(issue));
  };

  /** A person adds the ready label now: the issue changes and its events record who did it. */
  label(number: number, title = `Issue ${number}`): Issue {
    const atMs = Date.now();
    const issue: Issue = { number, title, body: briefBody(), state: "open", labels: ["ready"], updatedAtMs: atMs, events: [{ id: number * 100, event: "labeled", label: "ready", atMs }] };
    this.issues.set(number, issue);
    return issue;
  }

  /** A person takes the ready label off `afterMs` after the issue last changed. */
  unlabel(number: number, afterMs: number): void {
    const issue = this.issues.get(number)!;
    issue.labels = issue.labels.filter((l) => l !== "ready");
    issue.updatedAtMs += afterMs;
    issue.events.push({ id: number * 100 + 1, event: "unlabeled", label: "ready", atMs: issue.updatedAtMs });
  }

  /** The requests since `mark` that were not the installation token's. */
  readsSince(mark: number): string[] {
    return this.requests.slice(mark).filter((r) => !r.endsWith("/access_tokens"));
  }
}

function issueJson(issue: Issue) {
  return {
    number: issue.number,
    title: issue.title,
    body: issue.body,
    state: issue.state,
    state_reason: null,
    labels: issue.labels.map((name) => ({ name })),
    html_url: `https://github.example.test/${REPO}/issues/${issue.number}`,
    repository_url: `${API}/repos/${REPO}`,
    updated_at: new Date(issue.updatedAtMs).toISOString(),
  };
}

function eventJson(e: Issue["events"][number]) {
  return { id: e.id, event: e.event, created_at: new Date(e.atMs).toISOString(), actor: PERSON, label: e.label ? { name: e.label } : null, performed_via_github_app: null };
}

const github = new GitHubStandIn();
let org: { orgId: string; admin: string };
let project: AutopilotProject;

beforeAll(async () => {
  const { pkcs1Pem } = await appKeyPair();
  const deps: AdmissionDeps<AutopilotProject, AutopilotSecrets> = {
    readProject,
    readWebhookProject,
    listProjects,
    provider: (p, _secrets, config) => githubProvider({ ...p, githubApiUrl: API }, { privateKey: pkcs1Pem }, config, github.fetch),
    rules: { parseAgentBrief, checkEligibility, checkHumanReadiness },
  };
  (env as typeof env & AdmissionEnv).AUTOPILOT_ADMISSION = deps;
  org = await createOrg("webhook-requests");
  project = await createProject(org.admin, { repository: REPO, ready_label: "ready", queue_capacity: 10 });
});

/** The `issues` delivery GitHub sends as `issue` stood when the ready label was added (or `action` happened), signed with the project's secret. */
async function deliverLabeled(issue: Issue, action = "labeled"): Promise<void> {
  const payload = { action, label: { name: "ready" }, issue: issueJson(issue), repository: { full_name: REPO }, sender: PERSON };
  const body = JSON.stringify(payload);
  const res = await exports.default.fetch(
    new Request(`http://docket.test/v1/autopilot/projects/${project.id}/webhook`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": crypto.randomUUID(), "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, body) },
      body,
    }),
  );
  expect(res.status).toBe(202);
}

/** The issue's ticket once admission decided on it. */
interface Decided {
  status: string;
  run_id: string | null;
  reasons: string[];
}

async function decided(number: number): Promise<Decided> {
  const started = Date.now();
  while (Date.now() - started < 10_000) {
    const res = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${number}`, { token: org.admin });
    if (res.status === 200 && res.body.status !== "idle") return res.body as unknown as Decided;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`issue ${number} was never decided on`);
}

describe("the webhook door's GitHub requests", () => {
  it("an issue admitted through the webhook door costs at most 3 GitHub requests: the installation token, its blockers and its events; the issue itself is taken from the signed delivery", async () => {
    const mark = github.requests.length;
    const issue = github.label(1);
    await deliverLabeled(issue);
    const ticket = await decided(1);
    expect(ticket.status).toBe("admitted");
    const run = (await call("GET", `/v1/runs/${ticket.run_id}`, { token: org.admin })).body;
    expect(run.brief).toContain("Issue 1");
    const sent = github.requests.slice(mark);
    expect(sent.length).toBeLessThanOrEqual(3);
    expect(github.readsSince(mark).sort()).toEqual(["GET /repos/acme/app/issues/1/dependencies/blocked_by", "GET /repos/acme/app/issues/1/events"]);
  });

  it("a delivery older than a label change the issue's events record is not judged by: the issue is read, and its ready label, taken off since, refuses it", async () => {
    const issue = github.label(2);
    const delivered = structuredClone(issue);
    github.unlabel(2, 2_000);
    const mark = github.requests.length;
    await deliverLabeled(delivered);
    const ticket = await decided(2);
    expect(ticket).toMatchObject({ status: "refused", run_id: null });
    expect(ticket.reasons.join(" ")).toContain("ready");
    expect(github.readsSince(mark)).toContain("GET /repos/acme/app/issues/2");
  });
  it("a deleted issue's delivery is not judged by its payload: the issue is read, found gone, and its queued run withdrawn", async () => {
    const issue = github.label(3);
    await deliverLabeled(issue);
    const admitted = await decided(3);
    expect(admitted.status).toBe("admitted");
    github.issues.delete(3);
    await deliverLabeled(issue, "deleted");
    const started = Date.now();
    let ticket = admitted;
    while (ticket.status === "admitted" && Date.now() - started < 10_000) ticket = await decided(3);
    expect(ticket.status).toBe("lapsed");
    expect(ticket.reasons.join(" ")).toContain("cannot be read");
  });
});

describe("what a delivery hands admission", () => {
  const payload = (issue: Record<string, unknown>) => ({ action: "labeled", label: { name: "ready" }, issue, repository: { full_name: REPO }, sender: PERSON });

  it("the issue as the signed payload states it; none for a pull request, an issue object missing a field, or facts over AUTOPILOT_WEBHOOK_FACTS_MAX_BYTES", () => {
    const issue = issueJson(github.label(50, "Fix the README"));
    expect(ticketOfDelivery("issues", payload(issue), "ready", 100_000)?.issue).toEqual({
      title: "Fix the README",
      body: issue.body,
      state: "open",
      stateReason: null,
      labels: ["ready"],
      url: issue.html_url,
      updatedAtMs: Date.parse(issue.updated_at),
    });
    expect(ticketOfDelivery("issues", payload({ ...issue, pull_request: { url: "…" } }), "ready", 100_000)?.issue).toBeNull();
    const { labels: _labels, ...unlabelled } = issue;
    expect(ticketOfDelivery("issues", payload(unlabelled), "ready", 100_000)?.issue).toBeNull();
    expect(ticketOfDelivery("issues", payload(issue), "ready", 200)).toMatchObject({ number: 50, issue: null });
  });
});
