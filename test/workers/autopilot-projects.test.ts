// Autopilot projects through the API (docs/protocol.md, "Autopilot projects"): admins create and
// change them, members read them, every field is validated by name, and the webhook secret and the
// GitHub App's private key go in but never come out: stored encrypted, answered only as "set".

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readProject } from "../../src/autopilot/projects";
import worker from "../../src/index";
import { call, createOrg } from "./helpers";

type Json = Record<string, any>;

const WEBHOOK_SECRET = "whsec-test-0123456789-abcdefghij";
// A PEM-shaped key: only its form is checked here (the GitHub client signs with it).
const PRIVATE_KEY = [
  "-----BEGIN RSA PRIVATE KEY-----",
  "MIIEowIBAAKCAQEAtestkeytestkeytestkeytestkeytestkeytestkeytestkey0123",
  "c2VjcmV0LWJvZHktb2YtYS1wcml2YXRlLWtleS1mb3ItdGVzdHMtb25seQ==",
  "-----END RSA PRIVATE KEY-----",
  "",
].join("\n");

let repoCounter = 0;

function projectBody(overrides: Json = {}): Json {
  repoCounter += 1;
  return {
    name: "widgets autopilot",
    repository: `acme/widgets-${repoCounter}`,
    run: { launch: { command: ["node", "agent.mjs"] } },
    webhook_secret: WEBHOOK_SECRET,
    github: { app_id: "123456", installation_id: "7890123", private_key: PRIVATE_KEY },
    ...overrides,
  };
}

async function createProject(admin: string, overrides: Json = {}) {
  const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: projectBody(overrides) });
  if (res.status !== 201) throw new Error(`create project: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function storedRow(id: string): Promise<Json> {
  return (await env.DB.prepare("SELECT * FROM autopilot_projects WHERE id = ?").bind(id).first())!;
}

let admin: string;
let member: string;

beforeAll(async () => {
  ({ admin } = await createOrg("autopilot-org"));
  member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
});

/** A project as its own read answers it: the configuration, and a new project's GitHub budget and reconciliation (none yet). */
const withBudget = (project: Json) => ({
  ...project,
  github_budget: { requests_last_hour: 0, rate_limit: null, reserve: 500 },
  reconciliation: { state: "running", paused_reason: null, pass: null, last_full_pass_finished_at_ms: null },
  last_error: null,
});

describe("creating a project", () => {
  it("answers the configuration with every default, the webhook URL, and the secrets only as set", async () => {
    const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: projectBody({ repository: "Acme/Rockets" }) });
    expect(res.status).toBe(201);
    const p = res.body;
    expect(p.id).toMatch(/^apj_[0-9a-f]{24}$/);
    expect(p).toMatchObject({
      name: "widgets autopilot",
      provider: "github",
      repository: "Acme/Rockets",
      ready_label: "ready",
      review_label: "needs-review",
      brief_heading: "Agent Brief",
      done_states: ["completed"],
      done_labels: [],
      queue_capacity: 10,
      automation_accounts: [],
      trusted_actor_assumption: false,
      run: { labels: [], priority: 0, launch: { protocol: "process", command: ["node", "agent.mjs"], image: null, env: {} } },
      webhook: { url: `http://docket.test/v1/autopilot/projects/${p.id}/webhook`, secret_set: true },
      github: { api_url: "https://api.github.com", app_id: "123456", installation_id: "7890123", private_key_set: true },
    });
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(WEBHOOK_SECRET);
    expect(text).not.toContain("PRIVATE KEY");
  });

  it("keeps every field it is given", async () => {
    const p = await createProject(admin, {
      ready_label: "agent: ready",
      review_label: "agent: review",
      brief_heading: "Task for the agent",
      done_states: ["completed", "duplicate"],
      done_labels: ["shipped"],
      queue_capacity: 3,
      automation_accounts: ["renovate[bot]", "ci-robot"],
      trusted_actor_assumption: true,
      run: {
        labels: ["linux", "gpu"],
        priority: 7,
        launch: { protocol: "docker", command: ["agent"], image: "ghcr.io/acme/agent:1", env: { MODE: "fast" } },
        repository_url: "git@git.example.com:acme/widgets.git",
      },
      github: { api_url: "https://ghe.example.com/api/v3/", app_id: "42", installation_id: "43", private_key: PRIVATE_KEY },
    });
    expect(p).toMatchObject({
      ready_label: "agent: ready",
      review_label: "agent: review",
      brief_heading: "Task for the agent",
      done_states: ["completed", "duplicate"],
      done_labels: ["shipped"],
      queue_capacity: 3,
      automation_accounts: ["renovate[bot]", "ci-robot"],
      trusted_actor_assumption: true,
      run: {
        labels: ["gpu", "linux"],
        priority: 7,
        launch: { protocol: "docker", command: ["agent"], image: "ghcr.io/acme/agent:1", env: { MODE: "fast" } },
        repository_url: "git@git.example.com:acme/widgets.git",
      },
      github: { api_url: "https://ghe.example.com/api/v3", app_id: "42", installation_id: "43", private_key_set: true },
    });
  });

  it("stores the secrets encrypted, and readProject gives them back in clear", async () => {
    const p = await createProject(admin);
    const row = await storedRow(p.id);
    for (const column of ["webhook_secret_enc", "private_key_enc"]) {
      expect(row[column]).toMatch(/^v1\.[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]+$/);
    }
    const rowText = JSON.stringify(row);
    expect(rowText).not.toContain(WEBHOOK_SECRET);
    expect(rowText).not.toContain("PRIVATE KEY");
    expect(rowText).not.toContain("c2VjcmV0LWJvZHktb2YtYS1wcml2YXRlLWtleS1mb3ItdGVzdHMtb25seQ");

    const read = await readProject(env, p.id);
    expect(read).toMatchObject({ id: p.id, repository: p.repository, readyLabel: "ready", appId: "123456", installationId: "7890123" });
    expect(read!.secrets).toEqual({ webhookSecret: WEBHOOK_SECRET, privateKey: PRIVATE_KEY });
    expect(await readProject(env, "apj_000000000000000000000000")).toBeNull();
  });

  it("binds each ciphertext to its project and field: a value moved to another column does not decrypt", async () => {
    const p = await createProject(admin);
    const row = await storedRow(p.id);
    await env.DB.prepare("UPDATE autopilot_projects SET private_key_enc = ? WHERE id = ?").bind(row.webhook_secret_enc, p.id).run();
    await expect(readProject(env, p.id)).rejects.toMatchObject({ code: "autopilot_not_configured" });
  });

  it("cannot read the secrets under another AUTOPILOT_SECRET_KEY, and says which setting to look at", async () => {
    const p = await createProject(admin);
    const other = { ...env, AUTOPILOT_SECRET_KEY: "a-different-deployment-secret-0123456789" };
    await expect(readProject(other, p.id)).rejects.toMatchObject({ code: "autopilot_not_configured", details: { setting: "AUTOPILOT_SECRET_KEY" } });
    await expect(readProject({ ...env, AUTOPILOT_SECRET_KEY: undefined }, p.id)).rejects.toMatchObject({ code: "autopilot_not_configured" });
  });

  it("refuses a second project on a repository the organization already watches, whatever its case", async () => {
    const p = await createProject(admin);
    const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: { ...projectBody(), repository: p.repository.toUpperCase() } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "autopilot_project_exists", field: "repository" });
    // Another organization may watch the same repository.
    const other = await createOrg("autopilot-other-repo");
    expect((await call("POST", "/v1/autopilot/projects", { token: other.admin, body: { ...projectBody(), repository: p.repository } })).status).toBe(201);
  });

  it("is refused with 503 autopilot_not_configured, writing nothing, when the deployment has no AUTOPILOT_SECRET_KEY", async () => {
    const body = projectBody();
    for (const key of [undefined, "too-short"]) {
      const request = new Request("http://docket.test/v1/autopilot/projects", {
        method: "POST",
        headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      const ctx = createExecutionContext();
      const res = await worker.fetch(request, { ...env, AUTOPILOT_SECRET_KEY: key }, ctx);
      await waitOnExecutionContext(ctx);
      expect(res.status).toBe(503);
      const answer = (await res.json()) as Json;
      expect(answer.error).toMatchObject({ code: "autopilot_not_configured", setting: "AUTOPILOT_SECRET_KEY" });
      expect(answer.error.message).toContain("AUTOPILOT_SECRET_KEY");
    }
    const count = await env.DB.prepare("SELECT count(*) AS n FROM autopilot_projects WHERE repository = ?").bind(body.repository).first<{ n: number }>();
    expect(count!.n).toBe(0);
  });
});

describe("the queue capacity bound", () => {
  it("follows AUTOPILOT_QUEUE_CAPACITY_MAX, with max in the refusal", async () => {
    const send = async (vars: Json, capacity: number) => {
      const request = new Request("http://docket.test/v1/autopilot/projects", {
        method: "POST",
        headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
        body: JSON.stringify(projectBody({ queue_capacity: capacity })),
      });
      const ctx = createExecutionContext();
      const res = await worker.fetch(request, { ...env, ...vars }, ctx);
      await waitOnExecutionContext(ctx);
      return { status: res.status, body: (await res.json()) as Json };
    };
    const refused = await send({}, 300);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_request", field: "queue_capacity", max: 100 });
    const raised = await send({ AUTOPILOT_QUEUE_CAPACITY_MAX: "500" }, 300);
    expect(raised.status).toBe(201);
    expect(raised.body.queue_capacity).toBe(300);
  });
});

describe("validation names the field", () => {
  const cases: [string, Json, string][] = [
    ["a repository that is not owner/name", { repository: "just-a-name" }, "repository"],
    ["a repository named ..", { repository: "acme/.." }, "repository"],
    ["an empty ready label", { ready_label: " " }, "ready_label"],
    ["a label over 50 characters", { review_label: "x".repeat(51) }, "review_label"],
    ["the ready label as review label", { ready_label: "Ready", review_label: "ready" }, "review_label"],
    ["a brief heading with its #", { brief_heading: "## Agent Brief" }, "brief_heading"],
    ["a done state GitHub does not have", { done_states: ["open"] }, "done_states.0"],
    ["a queue capacity of 0", { queue_capacity: 0 }, "queue_capacity"],
    ["a queue capacity over AUTOPILOT_QUEUE_CAPACITY_MAX", { queue_capacity: 101 }, "queue_capacity"],
    ["an automation account that is not a login", { automation_accounts: ["not a login"] }, "automation_accounts.0"],
    ["a trusted actor flag that is not a boolean", { trusted_actor_assumption: "yes" }, "trusted_actor_assumption"],
    ["a run without a launch command", { run: { launch: {} } }, "run.launch.command"],
    ["a run with a bad runner label", { run: { labels: ["no spaces"], launch: { command: ["a"] } } }, "run.labels.0"],
    ["a run priority over 1000", { run: { priority: 1001, launch: { command: ["a"] } } }, "run.priority"],
    ["a short webhook secret", { webhook_secret: "short" }, "webhook_secret"],
    ["no webhook secret", { webhook_secret: undefined }, "webhook_secret"],
    ["an app id that is not a number", { github: { app_id: "my-app", installation_id: "1", private_key: PRIVATE_KEY } }, "github.app_id"],
    ["an installation id that is a JSON number", { github: { app_id: "1", installation_id: 2, private_key: PRIVATE_KEY } }, "github.installation_id"],
    ["a private key that is not PEM", { github: { app_id: "1", installation_id: "2", private_key: "hunter2" } }, "github.private_key"],
    ["a public key for a private key", { github: { app_id: "1", installation_id: "2", private_key: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n" } }, "github.private_key"],
    ["an http API URL off loopback", { github: { api_url: "http://github.example.com/api/v3", app_id: "1", installation_id: "2", private_key: PRIVATE_KEY } }, "github.api_url"],
    ["an API URL that is not a URL", { github: { api_url: "not a url", app_id: "1", installation_id: "2", private_key: PRIVATE_KEY } }, "github.api_url"],
    ["an API URL with a query", { github: { api_url: "https://ghe.example.com/api/v3?x=1", app_id: "1", installation_id: "2", private_key: PRIVATE_KEY } }, "github.api_url"],
    ["an unknown field", { colour: "blue" }, "body"],
  ];
  for (const [what, overrides, field] of cases) {
    it(`refuses ${what} (${field})`, async () => {
      const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: projectBody(overrides) });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field });
      expect(res.body.error.message).toContain(field);
    });
  }

  it("changes nothing when refused", async () => {
    const before = await env.DB.prepare("SELECT count(*) AS n FROM autopilot_projects").first<{ n: number }>();
    await call("POST", "/v1/autopilot/projects", { token: admin, body: projectBody({ queue_capacity: 0 }) });
    const after = await env.DB.prepare("SELECT count(*) AS n FROM autopilot_projects").first<{ n: number }>();
    expect(after!.n).toBe(before!.n);
  });
});

describe("GitHub API addresses", () => {
  const REFUSED = [
    ["http://127.0.0.1:8999/api", "127.0.0.1 is a loopback address"],
    ["https://localhost/api/v3", "localhost is a loopback name"],
    ["https://10.0.0.5/api/v3", "10.0.0.5 is a private address"],
    ["https://169.254.169.254/latest", "169.254.169.254 is a link-local address"],
    ["https://[fd00::1]/api/v3", "[fd00::1] is a unique-local address"],
    ["https://[::ffff:192.168.1.1]/api/v3", "[::ffff:c0a8:101] is an IPv4-mapped IPv6 address (a private address)"],
    ["https://140.82.112.6/api/v3", "140.82.112.6 is a bare IP address"],
    ["https://ghe.internal/api/v3", "ghe.internal is an internal name (.internal)"],
    ["https://ghe.corp/api/v3", "ghe.corp is an internal name (.corp)"],
  ] as const;
  const github = (api_url: string) => ({ api_url, app_id: "1", installation_id: "2", private_key: PRIVATE_KEY });
  const count = async () => (await env.DB.prepare("SELECT count(*) AS n FROM autopilot_projects").first<{ n: number }>())!.n;

  it("an api_url to a loopback, private, link-local, unique-local, internal or bare-IP host is refused on create, naming github.api_url, and makes no project", async () => {
    const before = await count();
    for (const [url, why] of REFUSED) {
      const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: projectBody({ github: github(url) }) });
      expect(res.status, url).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field: "github.api_url" });
      expect(res.body.error.message, url).toContain(`body github.api_url: ${why};`);
    }
    expect(await count()).toBe(before);
  });

  it("an api_url to such a host is refused on change too, and the project keeps its own", async () => {
    const project = await createProject(admin, { github: github("https://ghe.example.com/api/v3") });
    for (const [url, why] of REFUSED) {
      const res = await call("PATCH", `/v1/autopilot/projects/${project.id}`, { token: admin, body: { github: { api_url: url } } });
      expect(res.status, url).toBe(400);
      expect(res.body.error.message, url).toContain(`body github.api_url: ${why};`);
    }
    const read = await call("GET", `/v1/autopilot/projects/${project.id}`, { token: admin });
    expect(read.body.github.api_url).toBe("https://ghe.example.com/api/v3");
  });
});

describe("reading and listing", () => {
  it("lets a member read and list, newest first, a page at a time", async () => {
    const org = await createOrg("autopilot-lists");
    const reader = (await call("POST", "/v1/tokens", { token: org.admin, body: { kind: "member", role: "member" } })).body.token;
    const first = await createProject(org.admin);
    const second = await createProject(org.admin);
    const one = await call("GET", `/v1/autopilot/projects/${first.id}`, { token: reader });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(withBudget(first));

    const page1 = await call("GET", "/v1/autopilot/projects?limit=1", { token: reader });
    expect(page1.status).toBe(200);
    expect(page1.body.projects.map((p: Json) => p.id)).toEqual([second.id]);
    expect(page1.body.next_cursor).toEqual(expect.any(String));
    const page2 = await call("GET", `/v1/autopilot/projects?limit=1&cursor=${page1.body.next_cursor}`, { token: reader });
    expect(page2.body.projects.map((p: Json) => p.id)).toEqual([first.id]);
    expect(page2.body.next_cursor).toBeNull();
    expect(JSON.stringify([page1.body, page2.body])).not.toContain(WEBHOOK_SECRET);
  });

  it("hides another organization's projects: 404 to read or change, absent from its list", async () => {
    const p = await createProject(admin);
    const other = await createOrg("autopilot-stranger");
    const read = await call("GET", `/v1/autopilot/projects/${p.id}`, { token: other.admin });
    expect(read.status).toBe(404);
    expect(read.body.error.code).toBe("not_found");
    const change = await call("PATCH", `/v1/autopilot/projects/${p.id}`, { token: other.admin, body: { name: "mine now" } });
    expect(change.status).toBe(404);
    const list = await call("GET", "/v1/autopilot/projects", { token: other.admin });
    expect(list.body.projects.map((x: Json) => x.id)).not.toContain(p.id);
    expect((await call("GET", `/v1/autopilot/projects/${p.id}`, { token: admin })).body.name).toBe("widgets autopilot");
  });

  it("refuses a malformed id and a malformed cursor", async () => {
    expect((await call("GET", "/v1/autopilot/projects/prj_123", { token: admin })).body.error).toMatchObject({ code: "invalid_request", field: "id" });
    expect((await call("GET", "/v1/autopilot/projects?cursor=nope", { token: admin })).body.error).toMatchObject({ code: "invalid_request", field: "cursor" });
  });
});

describe("who may write", () => {
  it("refuses a member who is not an admin, and a call without a token", async () => {
    const created = await call("POST", "/v1/autopilot/projects", { token: member, body: projectBody() });
    expect(created.status).toBe(403);
    expect(created.body.error.code).toBe("forbidden");
    const p = await createProject(admin);
    const changed = await call("PATCH", `/v1/autopilot/projects/${p.id}`, { token: member, body: { queue_capacity: 2 } });
    expect(changed.status).toBe(403);
    expect((await call("GET", `/v1/autopilot/projects/${p.id}`, { token: member })).body.queue_capacity).toBe(10);
    expect((await call("GET", "/v1/autopilot/projects")).status).toBe(401);
  });
});

describe("changing a project", () => {
  it("changes only the fields sent", async () => {
    const p = await createProject(admin, { automation_accounts: ["ci-robot"] });
    const res = await call("PATCH", `/v1/autopilot/projects/${p.id}`, {
      token: admin,
      body: { ready_label: "go", trusted_actor_assumption: true, run: { priority: 9 }, github: { installation_id: "555" } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      ...p,
      ready_label: "go",
      trusted_actor_assumption: true,
      run: { ...p.run, priority: 9 },
      github: { ...p.github, installation_id: "555" },
      updated_at_ms: res.body.updated_at_ms,
    });
    expect(res.body.updated_at_ms).toBeGreaterThanOrEqual(p.updated_at_ms);
    expect((await call("GET", `/v1/autopilot/projects/${p.id}`, { token: member })).body).toEqual(withBudget(res.body));
  });

  it("sets the repository URL runners clone and push, and null puts the issue's repository page back", async () => {
    const p = await createProject(admin);
    expect(p.run.repository_url).toBeNull();
    const set = await call("PATCH", `/v1/autopilot/projects/${p.id}`, { token: admin, body: { run: { repository_url: "/srv/git/widgets.git" } } });
    expect(set.status).toBe(200);
    expect(set.body.run).toEqual({ ...p.run, repository_url: "/srv/git/widgets.git" });
    const cleared = await call("PATCH", `/v1/autopilot/projects/${p.id}`, { token: admin, body: { run: { repository_url: null } } });
    expect(cleared.body.run).toEqual(p.run);
  });

  it("replaces a secret sent, which still cannot be read back", async () => {
    const p = await createProject(admin);
    const before = await storedRow(p.id);
    const newSecret = "rotated-webhook-secret-0123456789";
    const res = await call("PATCH", `/v1/autopilot/projects/${p.id}`, { token: admin, body: { webhook_secret: newSecret } });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain(newSecret);
    expect(res.body.webhook.secret_set).toBe(true);
    const after = await storedRow(p.id);
    expect(after.webhook_secret_enc).not.toBe(before.webhook_secret_enc);
    expect(after.private_key_enc).toBe(before.private_key_enc);
    expect((await readProject(env, p.id))!.secrets).toEqual({ webhookSecret: newSecret, privateKey: PRIVATE_KEY });
  });

  it("validates a change as a creation, and changes nothing when refused", async () => {
    const p = await createProject(admin);
    const cases: [Json, string][] = [
      [{}, "body"],
      [{ queue_capacity: 500 }, "queue_capacity"],
      [{ review_label: "READY" }, "review_label"],
      [{ github: { private_key: "nope" } }, "github.private_key"],
      [{ provider: "linear" }, "body"],
    ];
    for (const [body, field] of cases) {
      const res = await call("PATCH", `/v1/autopilot/projects/${p.id}`, { token: admin, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field });
    }
    expect((await call("GET", `/v1/autopilot/projects/${p.id}`, { token: admin })).body).toEqual(withBudget(p));
  });

  it("refuses moving a project onto a repository another project watches", async () => {
    const a = await createProject(admin);
    const b = await createProject(admin);
    const res = await call("PATCH", `/v1/autopilot/projects/${b.id}`, { token: admin, body: { repository: a.repository } });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("autopilot_project_exists");
    expect((await call("GET", `/v1/autopilot/projects/${b.id}`, { token: admin })).body.repository).toBe(b.repository);
  });
});
