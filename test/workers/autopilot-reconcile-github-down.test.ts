// Autopilot while GitHub cannot be read (docs/protocol.md, "Autopilot admission"): an admin's
// reconcile request answers a 502 github_unavailable that says why (no connection, no answer in
// time, the App refused), within about one GITHUB_REQUEST_TIMEOUT_MS, never a 500 after every retry;
// and the project shows its last error, from that request or from a webhook accepted earlier.
//
// What is real: the project and its store, the route, reconciliation and the production GitHub
// provider (Octokit, its retries and time bounds, src/autopilot/github/). What stands in: the
// network under the provider, a fetch that fails as the test says (no request leaves the Worker).

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../src/index";
import { parseAgentBrief } from "../../src/autopilot/brief";
import type { AdmissionDeps, AdmissionEnv } from "../../src/autopilot/deps";
import { checkEligibility } from "../../src/autopilot/eligibility";
import { githubProvider } from "../../src/autopilot/github/provider";
import { listProjects, readProject, readWebhookProject, type AutopilotProject, type AutopilotSecrets } from "../../src/autopilot/projects";
import { checkHumanReadiness } from "../../src/autopilot/readiness";
import { appKeyPair } from "./app-key";
import { call, createOrg, sleep } from "./helpers";
import { createProject, example, sign, WEBHOOK_SECRET, type RealProject } from "./autopilot-fakes";

const TIMEOUT_MS = 300;

/** How the network under the provider fails for the next requests. */
let network: "refused" | "silent" | "bad_credentials" = "refused";
let requests = 0;

const brokenFetch: typeof fetch = async (_input, init) => {
  requests += 1;
  if (network === "refused") throw new TypeError("Network connection lost.");
  if (network === "bad_credentials") return Response.json({ message: "A JSON web token could not be decoded" }, { status: 401 });
  // No answer: the request waits until the provider's time bound aborts it.
  return new Promise<Response>((_resolve, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal!.reason)));
};

const deps: AdmissionDeps<AutopilotProject, AutopilotSecrets> = {
  readProject,
  readWebhookProject,
  listProjects,
  provider: (project, secrets, config) => githubProvider(project, secrets, config, brokenFetch),
  rules: { parseAgentBrief, checkEligibility, checkHumanReadiness },
};
(env as typeof env & AdmissionEnv).AUTOPILOT_ADMISSION = deps;

let admin: string;
let project: RealProject;

/** POST …/reconcile as an admin, with GITHUB_REQUEST_TIMEOUT_MS shortened; the answer and how long it took. */
async function reconcile() {
  const request = new Request(`http://docket.test/v1/autopilot/projects/${project.id}/reconcile`, {
    method: "POST",
    headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
    body: "{}",
  });
  const ctx = createExecutionContext();
  const startedAt = Date.now();
  const res = await worker.fetch(request, { ...env, GITHUB_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS), GITHUB_TOKEN_CACHE_MAX: "0" }, ctx);
  await waitOnExecutionContext(ctx);
  return { status: res.status, body: (await res.json()) as Record<string, any>, tookMs: Date.now() - startedAt };
}

beforeAll(async () => {
  ({ admin } = await createOrg("github-down"));
  project = await createProject(admin, { github: { app_id: "123456", installation_id: "7890123", private_key: (await appKeyPair()).pkcs1Pem } });
});

describe("an admin's reconcile while GitHub cannot be read", () => {
  it("a refused connection answers 502 github_unavailable naming it, tried once, not a 500 blaming the App's credentials", async () => {
    network = "refused";
    requests = 0;
    const res = await reconcile();
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: "github_unavailable", failure: "unavailable", github_status: null });
    expect(res.body.error.message).toContain("could not reach GitHub at https://api.github.com");
    expect(res.body.error.message).not.toMatch(/credentials|App id|private key/);
    expect(requests).toBe(1);
    const read = await call("GET", `/v1/autopilot/projects/${project.id}`, { token: admin });
    expect(read.body.last_error).toMatchObject({ door: "operator", failure: "unavailable", number: null });
    expect(read.body.last_error.message).toContain("could not reach GitHub");
  });

  it("GitHub not answering ends within about GITHUB_REQUEST_TIMEOUT_MS with 502 failure timeout", async () => {
    network = "silent";
    requests = 0;
    const res = await reconcile();
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: "github_unavailable", failure: "timeout" });
    expect(res.body.error.message).toContain(`did not answer within ${TIMEOUT_MS} ms`);
    expect(requests).toBe(1);
    expect(res.tookMs).toBeLessThan(3 * TIMEOUT_MS + 1_000);
  });

  it("GitHub refusing the App answers 502 failure unauthorized with GitHub's status, saying what to check", async () => {
    network = "bad_credentials";
    const res = await reconcile();
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: "github_unavailable", failure: "unauthorized", github_status: 401 });
    expect(res.body.error.message).toContain("check the App id, installation id and private key");
  });
});

describe("a webhook accepted while GitHub cannot be read", () => {
  it("is answered 202, and once its admission fails the project shows why as its last error, naming the issue", async () => {
    network = "bad_credentials";
    const payload = example("issues", "labeled");
    payload.issue.number = 7;
    const body = JSON.stringify(payload);
    const res = await exports.default.fetch(
      new Request(`http://docket.test/v1/autopilot/projects/${project.id}/webhook`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": crypto.randomUUID(), "X-Hub-Signature-256": await sign(WEBHOOK_SECRET, body) },
        body,
      }),
    );
    expect(res.status).toBe(202);
    let lastError: Record<string, any> | null = null;
    for (let i = 0; i < 100 && lastError?.door !== "webhook"; i++) {
      await sleep(100);
      lastError = (await call("GET", `/v1/autopilot/projects/${project.id}`, { token: admin })).body.last_error;
    }
    expect(lastError).toMatchObject({ door: "webhook", failure: "unauthorized", number: 7 });
    expect(lastError!.message).toContain("check the App id, installation id and private key");
  });
});
