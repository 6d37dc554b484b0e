// Autopilot projects whose tracker is Linear (docs/autopilot.md, "Linear"): the tracker is named
// apart from the code host (the GitHub repository), every Linear field is validated by name, a
// refused request changes nothing, and the Linear API key goes in encrypted and never comes out.

import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readProject } from "../../src/autopilot/projects";
import { parseTicketKey, ticketKey, ticketObjectName } from "../../src/autopilot/provider";
import { call, createOrg } from "./helpers";

type Json = Record<string, any>;

const LINEAR_KEY = "lin_api_0123456789abcdefghijklmnopqrstuvwxyz";
const PRIVATE_KEY = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAtestkeytestkeytestkeytestkeytestkeytestkeytestkey0123", "-----END RSA PRIVATE KEY-----", ""].join("\n");

let counter = 0;

function linearBody(tracker: Json = {}, overrides: Json = {}): Json {
  counter += 1;
  return {
    name: "linear autopilot",
    repository: "acme/widgets",
    tracker: { kind: "linear", workspace: "acme", team: `T${counter}`, review_state: "In Review", api_key: LINEAR_KEY, ...tracker },
    run: { launch: { command: ["node", "agent.mjs"] } },
    webhook_secret: "lin_wh_signing_secret_0123456789",
    github: { app_id: "123456", installation_id: "7890123", private_key: PRIVATE_KEY },
    ...overrides,
  };
}

async function storedRow(id: string): Promise<Json> {
  return (await env.DB.prepare("SELECT * FROM autopilot_projects WHERE id = ?").bind(id).first())!;
}

let admin: string;

beforeAll(async () => {
  ({ admin } = await createOrg("linear-projects-org"));
});

describe("a Linear-tracked project", () => {
  it("names Linear as its tracker and the GitHub repository as its code host, with the key only as set", async () => {
    const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody({ team: "eng", done_states: ["Shipped"] }) });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      provider: "linear",
      repository: "acme/widgets",
      tracker: {
        kind: "linear",
        api_url: "https://api.linear.app/graphql",
        workspace: "acme",
        team: "ENG",
        project: null,
        ready_label: "ready",
        ready_state: null,
        review_state: "In Review",
        done_states: ["Shipped"],
        api_key_set: true,
      },
      github: { app_id: "123456", private_key_set: true },
      webhook: { secret_set: true },
    });
    expect(res.body.webhook.url).toMatch(new RegExp(`/v1/autopilot/projects/${res.body.id}/linear/webhook$`));
    expect(JSON.stringify(res.body)).not.toContain(LINEAR_KEY);
    const row = await storedRow(res.body.id);
    expect(row.tracker_token_enc).toMatch(/^v1\./);
    expect(row.tracker_token_enc).not.toContain(LINEAR_KEY);
    const read = await readProject(env, res.body.id);
    expect(read!.secrets.trackerToken).toBe(LINEAR_KEY);
    expect(read).toMatchObject({ provider: "linear", ticketScope: "acme/ENG", readyLabel: "ready", readyState: null, reviewLabel: "In Review", repositoryPage: "https://github.com/acme/widgets" });
  });

  it("takes a ready workflow state instead of a label, which admission then asks the tracker about", async () => {
    const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody({ ready_state: "Ready for Agent" }) });
    expect(res.status).toBe(201);
    expect(res.body.tracker).toMatchObject({ ready_label: null, ready_state: "Ready for Agent" });
    expect(await readProject(env, res.body.id)).toMatchObject({ readyState: "Ready for Agent", readyLabel: "Ready for Agent" });
  });

  it("refuses bad Linear settings with a 400 naming the field, and stores nothing", async () => {
    const before = (await env.DB.prepare("SELECT COUNT(*) AS n FROM autopilot_projects").first<{ n: number }>())!.n;
    const cases: [Json, Json, string][] = [
      [{ team: "not a key" }, {}, "tracker.team"],
      [{ workspace: "Acme Corp" }, {}, "tracker.workspace"],
      [{ api_key: undefined }, {}, "tracker.api_key"],
      [{ review_state: undefined }, {}, "tracker.review_state"],
      [{ ready_label: "go", ready_state: "Ready" }, {}, "tracker.ready_state"],
      [{ ready_state: "In Review" }, {}, "tracker.review_state"],
      [{ project: "not-a-uuid" }, {}, "tracker.project"],
      [{}, { ready_label: "go" }, "ready_label"],
      [{}, { done_labels: ["done"] }, "done_labels"],
      [{}, { provider: "github" }, "provider"],
    ];
    for (const [tracker, overrides, field] of cases) {
      const res = await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody(tracker, overrides) });
      expect(res.status, JSON.stringify(tracker) + JSON.stringify(overrides)).toBe(400);
      expect(res.body.error.field).toBe(field);
    }
    const after = (await env.DB.prepare("SELECT COUNT(*) AS n FROM autopilot_projects").first<{ n: number }>())!.n;
    expect(after).toBe(before);
  });

  it("refuses a second project on the same Linear team, not a second one on the same repository", async () => {
    const first = await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody({ team: "OPS" }) });
    expect(first.status).toBe(201);
    const again = await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody({ team: "ops" }) });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("autopilot_project_exists");
    const otherTeam = await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody({ team: "WEB" }) });
    expect(otherTeam.status).toBe(201);
  });

  it("keeps its stored key when a change leaves api_key out, and drops it when the project goes back to GitHub Issues", async () => {
    const created = (await call("POST", "/v1/autopilot/projects", { token: admin, body: linearBody() })).body;
    const keyBefore = (await storedRow(created.id)).tracker_token_enc;
    const changed = await call("PATCH", `/v1/autopilot/projects/${created.id}`, {
      token: admin,
      body: { tracker: { kind: "linear", workspace: "acme", team: created.tracker.team, review_state: "Review" } },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.tracker).toMatchObject({ review_state: "Review", api_key_set: true });
    expect((await storedRow(created.id)).tracker_token_enc).toBe(keyBefore);
    const back = await call("PATCH", `/v1/autopilot/projects/${created.id}`, { token: admin, body: { tracker: { kind: "github" }, repository: "acme/gizmos" } });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ provider: "github", tracker: { kind: "github" } });
    expect((await storedRow(created.id)).tracker_token_enc).toBe("");
  });

  it("refuses switching a GitHub project to Linear without a key, and changes nothing", async () => {
    counter += 1;
    const github = (await call("POST", "/v1/autopilot/projects", { token: admin, body: { ...linearBody(), tracker: undefined, repository: `acme/plain-${counter}` } })).body;
    expect(github.provider).toBe("github");
    const before = await storedRow(github.id);
    const res = await call("PATCH", `/v1/autopilot/projects/${github.id}`, { token: admin, body: { tracker: { kind: "linear", workspace: "acme", team: "NEW", review_state: "In Review" } } });
    expect(res.status).toBe(400);
    expect(res.body.error.field).toBe("tracker.api_key");
    expect(await storedRow(github.id)).toEqual(before);
  });
});

describe("Linear ticket keys", () => {
  it("are provider-qualified as linear:<workspace>/<issue identifier>, and parse back", () => {
    const ref = { provider: "linear" as const, repository: "acme/ENG", number: 12 };
    expect(ticketKey(ref)).toBe("linear:acme/ENG-12");
    expect(parseTicketKey("linear:acme/ENG-12")).toEqual(ref);
    expect(parseTicketKey("github:acme/widgets#12")).toEqual({ provider: "github", repository: "acme/widgets", number: 12 });
    expect(parseTicketKey("linear:acme/ENG#12")).toBeNull();
    expect(ticketObjectName("apj_1", ticketKey(ref))).toBe("apj_1:linear:acme/eng-12");
  });
});
