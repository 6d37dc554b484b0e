// Creating an autopilot project from the console (README.md, "Dashboard"): an admin's form, one
// call to POST /v1/autopilot/projects; a refusal is said beside the form, which keeps what was typed
// but the secrets; a member is refused.

import { describe, expect, it } from "vitest";
import { page, signIn } from "./dashboard-helpers";
import { call, createOrg } from "./helpers";
import { installRealAutopilotWithTracker, PRIVATE_KEY } from "./autopilot-fakes";

installRealAutopilotWithTracker();

const githubForm = {
  name: "widgets autopilot",
  repository: "acme/widgets",
  tracker: "github",
  ready_label: "",
  command: "node  agent.mjs --fast",
  labels: "linux, gpu",
  webhook_secret: "a-webhook-secret-of-enough-length",
  app_id: "1001",
  installation_id: "2002",
  api_url: "",
  private_key: PRIVATE_KEY,
};

const projectsOf = async (admin: string) => (await call("GET", "/v1/autopilot/projects", { token: admin })).body.projects as Record<string, any>[];

describe("a new autopilot project from the console", () => {
  it("an admin's form creates a GitHub Issues project with the API's defaults, and its page shows where to point the webhook", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    expect((await page("/dash/autopilot", { cookie: session })).text).toContain('<a href="/dash/autopilot/new">New autopilot project</a>');
    const form = await page("/dash/autopilot/new", { cookie: session });
    expect(form.status).toBe(200);
    expect(form.text).toContain('<form method="post" action="/dash/autopilot" id="new-project">');

    const created = await page("/dash/autopilot", { cookie: session, form: githubForm });
    expect(created.status, created.text).toBe(303);
    const [project] = await projectsOf(admin);
    expect(created.headers.get("Location")).toBe(`/dash/autopilot/${project.id}?done=project+created`);
    expect(project).toMatchObject({
      name: "widgets autopilot",
      repository: "acme/widgets",
      tracker: { kind: "github" },
      ready_label: "ready",
      run: { labels: ["gpu", "linux"], launch: { command: ["node", "agent.mjs", "--fast"] } },
      webhook: { secret_set: true },
      github: { api_url: "https://api.github.com", app_id: "1001", installation_id: "2002", private_key_set: true },
    });
    const shown = (await page(`/dash/autopilot/${project.id}?done=project+created`, { cookie: session })).text;
    expect(shown).toContain('<p class="ok" role="status">Done: project created.</p>');
    expect(shown).toContain(`<code>http://docket.test/v1/autopilot/projects/${project.id}/webhook</code>`);
  });

  it("a Linear team's project takes the team, its workspace and API key", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const linear = { ...githubForm, tracker: "linear", ready_label: "agent-ready", linear_workspace: "acme", linear_team: "ENG", linear_review_state: "", api_key: "lin_api_a_console_key_0123456789" };
    expect((await page("/dash/autopilot", { cookie: session, form: linear })).status).toBe(303);
    const [project] = await projectsOf(admin);
    expect(project.tracker).toMatchObject({ kind: "linear", workspace: "acme", team: "ENG", ready_label: "agent-ready", review_state: "In Review", api_key_set: true });
    expect(JSON.stringify(project)).not.toContain("lin_api_a_console_key");
  });

  it("a refused field is said beside the form, which keeps what was typed but the secrets, and nothing is created", async () => {
    const { admin } = await createOrg();
    const session = await signIn(admin);
    const refused = await page("/dash/autopilot", { cookie: session, form: { ...githubForm, app_id: "not-a-number" } });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("Cache-Control")).toBe("no-store");
    expect(refused.text).toMatch(/<p id="new-project-problem" class="error" role="alert">The project was not created: body github\.app_id: [^<]+ \(type the secrets again: they are not sent back\)<\/p>/);
    expect(refused.text).toContain('name="app_id" value="not-a-number" required="" autocomplete="off" aria-invalid="true" aria-describedby="new-project-problem"/>');
    expect(refused.text).toContain('name="name" value="widgets autopilot"');
    expect(refused.text).toContain('name="webhook_secret" value=""');
    expect(refused.text).not.toContain("a-webhook-secret-of-enough-length");
    expect(refused.text).not.toContain("BEGIN RSA PRIVATE KEY");
    expect(await projectsOf(admin)).toEqual([]);
  });

  it("a member is refused the form and its answer, and nothing is created", async () => {
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } })).body.token;
    const session = await signIn(member);
    expect((await page("/dash/autopilot", { cookie: session })).text).not.toContain("New autopilot project</a>");
    expect((await page("/dash/autopilot/new", { cookie: session })).status).toBe(403);
    expect((await page("/dash/autopilot", { cookie: session, form: githubForm })).status).toBe(403);
    expect(await projectsOf(admin)).toEqual([]);
  });
});
