// The security matrix: every endpoint of docs/protocol.md against no token, malformed tokens, a
// token of the wrong kind, another organization's token, another machine's token, an old attempt's
// token and a member without the role. Each gets its structured error (or, for a caller acting in
// its own organization, only its own data), and a read-back of the victim organization — every D1
// row it owns, its runs, their events and its build job — shows nothing changed
// (../shared/DESIGN.md, invariants 4 and 8; docs/protocol.md, "Errors").

import { beforeAll, describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { acceptLicense, createProject, createRequest, dispatchBuild, grantCredit, savePlan } from "./builds-helpers";
import { send } from "./direct";
import { ADMIN_SECRET, ageRun, call, CLI_VERSION, createOrg, registerRunner, runBody } from "./helpers";
import { muteTransitionLogs } from "./quiet";
import { orgState } from "./read-back";
import { installRealAutopilotWithTracker } from "./autopilot-fakes";


/** The victim organization A and the caller organization B, with every kind of credential. */
const A = {} as {
  orgId: string;
  admin: string;
  member: string;
  registration: string;
  registrationId: string;
  /** Credentials that were issued but no longer work: a revoked admin token, an expired and a used-up registration token, a deregistered machine. */
  revokedAdmin: string;
  expiredRegistration: string;
  usedUpRegistration: string;
  deregistered: { machineId: string; token: string };
  m1: { machineId: string; token: string };
  m2: { machineId: string; token: string };
  run: string;
  token1: string;
  token2: string;
  projectId: string;
  requestId: string;
  jobId: string;
  jobRun: string;
  autopilotProjectId: string;
};
const B = {} as { orgId: string; admin: string; registration: string; machine: { machineId: string; token: string }; run: string; attemptToken: string };

beforeAll(async () => {
  muteTransitionLogs();
  const a = await createOrg("victim");
  A.orgId = a.orgId;
  A.admin = a.admin;
  A.member = (await call("POST", "/v1/tokens", { token: A.admin, body: { kind: "member", role: "member" } })).body.token;
  const registration = (await call("POST", "/v1/tokens", { token: A.admin, body: { kind: "registration" } })).body;
  A.registration = registration.token;
  A.registrationId = registration.id;
  await issueDeadCredentials();
  A.m1 = await registerRunner(A.admin, { name: "a-1" });
  A.m2 = await registerRunner(A.admin, { name: "a-2" });
  // The run is at its second attempt, held and launched by m2; m1 held the first.
  A.run = (await call("POST", "/v1/runs", { token: A.admin, body: runBody({ callback_url: "https://example.com/docket" }), headers: { "Idempotency-Key": "victim-run" } })).body.id;
  const first = await claimAs(A.m1.token);
  expect(first.body.run_id).toBe(A.run);
  A.token1 = first.body.attempt_token;
  expect((await call("POST", `/v1/runs/${A.run}/attempts/1/launch-failed`, { token: A.m1.token, body: { error: "pull failed" } })).status).toBe(200);
  await ageRun(A.run, 60_000);
  const second = await claimAs(A.m2.token);
  expect(second.body).toMatchObject({ run_id: A.run, attempt: 2 });
  A.token2 = second.body.attempt_token;
  expect((await call("POST", `/v1/runs/${A.run}/attempts/2/launched`, { token: A.m2.token, body: { sandbox_id: "sbx-2" } })).status).toBe(200);
  // A paid build: credit, a licensed project, a planned request and its queued job.
  await grantCredit(A.admin, 10_000);
  A.projectId = await createProject(A.admin);
  await acceptLicense(A.admin, A.projectId);
  A.requestId = await createRequest(A.admin, A.projectId);
  await savePlan(A.admin, A.requestId);
  const job = await dispatchBuild(A.admin, A.requestId, "victim-job");
  expect(job.status).toBe(201);
  A.jobId = job.body.id;
  A.jobRun = job.body.run_id;
  // An autopilot project, with its secrets; admission reads it through the real store and rules,
  // GitHub standing in as an in-memory tracker (test/workers/autopilot-fakes.ts).
  installRealAutopilotWithTracker();
  const autopilot = await call("POST", "/v1/autopilot/projects", { token: A.admin, body: autopilotBody("victim/repo") });
  expect(autopilot.status).toBe(201);
  A.autopilotProjectId = autopilot.body.id;

  const b = await createOrg("caller");
  B.orgId = b.orgId;
  B.admin = b.admin;
  B.registration = (await call("POST", "/v1/tokens", { token: B.admin, body: { kind: "registration" } })).body.token;
  B.machine = await registerRunner(B.admin, { name: "b-1" });
  B.run = (await call("POST", "/v1/runs", { token: B.admin, body: runBody() })).body.id;
  const claimedB = await claimAs(B.machine.token);
  expect(claimedB.body.run_id).toBe(B.run);
  B.attemptToken = claimedB.body.attempt_token;
});

/** A's credentials that no longer work, each refused with 401 wherever it is sent. */
async function issueDeadCredentials() {
  const revoked = (await call("POST", "/v1/tokens", { token: A.admin, body: { kind: "member", role: "admin" } })).body;
  expect((await call("DELETE", `/v1/tokens/${revoked.id}`, { token: A.admin })).status).toBe(200);
  A.revokedAdmin = revoked.token;
  A.expiredRegistration = (await call("POST", "/v1/tokens", { token: A.admin, body: { kind: "registration", expires_in_ms: 1 } })).body.token;
  A.usedUpRegistration = (await call("POST", "/v1/tokens", { token: A.admin, body: { kind: "registration", max_uses: 1 } })).body.token;
  const register = { name: "a-used", labels: [], protocols: ["process"], cli_version: CLI_VERSION };
  expect((await call("POST", "/v1/runners/register", { token: A.usedUpRegistration, body: register })).status).toBe(201);
  A.deregistered = await registerRunner(A.admin, { name: "a-gone" });
  expect((await call("DELETE", `/v1/runners/${A.deregistered.machineId}`, { token: A.admin })).status).toBe(200);
}

function autopilotBody(repository: string) {
  const privateKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n";
  return { name: "autopilot", repository, run: { launch: { command: ["agent"] } }, webhook_secret: "victim-webhook-secret", github: { app_id: "1", installation_id: "2", private_key: privateKey } };
}

function claimAs(token: string) {
  return call("POST", "/v1/runners/claim", { token, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 0 } });
}

/** The victim organization as the read-back sees it. */
const victimState = () => orgState({ orgId: A.orgId, admin: A.admin, runIds: [A.run, A.jobRun], jobIds: [A.jobId] });

/** A's state as the last check read it after its call: the tests of a file run one after another, so it is the next call's "before". */
let lastRead: Awaited<ReturnType<typeof victimState>> | undefined;

/** Runs `call` (the request and its assertions) and checks that it left A as it found it. */
async function leavesVictimUnchanged(call: () => Promise<void>): Promise<void> {
  const before = lastRead ?? (await victimState());
  // A call or assertion that throws leaves nothing behind: the next check reads A again first.
  lastRead = undefined;
  await call();
  const after = await victimState();
  lastRead = after;
  expect(after).toEqual(before);
}

// ---- the matrix ---------------------------------------------------------------------------------

type Expect = { status: number; code?: string } | "own";
interface Credential {
  name: string;
  header: () => string | undefined;
}

const none: Credential = { name: "no token", header: () => undefined };
const malformed: Credential[] = [
  { name: "a malformed token", header: () => "Bearer dkt_m_not-a-token" },
  { name: "a token of the right shape that was never issued", header: () => `Bearer dkt_m_${"ab".repeat(32)}` },
  { name: "another scheme", header: () => `Basic ${btoa("admin:admin")}` },
  { name: "the operator secret", header: () => `Bearer ${ADMIN_SECRET}` },
];
const bearer = (name: string, token: () => string): Credential => ({ name, header: () => `Bearer ${token()}` });
/** Every issued credential that no longer works: whatever the endpoint, each one is a 401. */
const dead = (): Credential[] => [
  bearer("a revoked admin token", () => A.revokedAdmin),
  bearer("an expired registration token", () => A.expiredRegistration),
  bearer("a used-up registration token", () => A.usedUpRegistration),
  bearer("a deregistered machine's token", () => A.deregistered.token),
];

const unauthorized = { status: 401, code: "unauthorized" } as const;
const notFound = { status: 404, code: "not_found" } as const;
const forbidden = { status: 403, code: "forbidden" } as const;

interface Endpoint {
  method: string;
  /** The route as the app registers it. */
  route: string;
  path: () => string;
  /** Which resource the path names, when the route alone does not say. */
  note?: string;
  body?: () => unknown;
  cases: () => [Credential, Expect][];
}

/** Member endpoints about one of A's resources: another organization never learns it exists. */
function memberOfA(role: "member" | "admin" | "owner"): [Credential, Expect][] {
  const cases: [Credential, Expect][] = [
    [none, unauthorized],
    ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
    [bearer("a machine token", () => A.m2.token), unauthorized],
    [bearer("a registration token", () => A.registration), unauthorized],
    [bearer("a run-attempt token", () => A.token2), unauthorized],
    ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
    [bearer("another organization's admin token", () => B.admin), notFound],
  ];
  if (role !== "member") cases.push([bearer("a member without the role", () => A.member), forbidden]);
  return cases;
}

/** Member endpoints that act in the caller's own organization: another one sees only its own. */
function memberOwn(role: "member" | "admin"): [Credential, Expect][] {
  const cases: [Credential, Expect][] = [
    [none, unauthorized],
    ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
    [bearer("a machine token", () => A.m2.token), unauthorized],
    [bearer("a registration token", () => A.registration), unauthorized],
    [bearer("a run-attempt token", () => A.token2), unauthorized],
    ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
    [bearer("another organization's admin token", () => B.admin), "own"],
  ];
  if (role === "admin") cases.push([bearer("a member without the role", () => A.member), forbidden]);
  return cases;
}

/** Calls a machine makes about attempt `n` of A's run (m2 holds attempt 2). */
function attemptCall(what: string, body: () => unknown): Endpoint[] {
  const route = `/v1/runs/:id/attempts/:n/${what}`;
  const at = (n: number) => () => `/v1/runs/${A.run}/attempts/${n}/${what}`;
  return [
    {
      method: "POST",
      route,
      path: at(2),
      note: "the current attempt",
      body,
      cases: () => [
        [none, unauthorized],
        ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
        [bearer("a member token", () => A.admin), unauthorized],
        [bearer("a registration token", () => A.registration), unauthorized],
        [bearer("the attempt's own run-attempt token", () => A.token2), unauthorized],
        ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
        [bearer("another organization's machine token", () => B.machine.token), { status: 403, code: "other_organization" }],
        [bearer("another machine's token", () => A.m1.token), { status: 409, code: "other_machine" }],
      ],
    },
    {
      method: "POST",
      route,
      path: at(1),
      note: "the old attempt",
      body,
      cases: () => [
        [bearer("the old attempt's machine, for the old attempt", () => A.m1.token), { status: 409, code: "stale_attempt" }],
        [bearer("the current machine, for the old attempt", () => A.m2.token), { status: 409, code: "stale_attempt" }],
      ],
    },
  ];
}

const runId = () => A.run;
const endpoints: Endpoint[] = [
  {
    method: "POST",
    route: "/v1/orgs",
    path: () => "/v1/orgs",
    body: () => ({ name: "intruder" }),
    cases: () => [[none, unauthorized], ...malformed.slice(0, 3).map((c): [Credential, Expect] => [c, unauthorized]), [bearer("an admin member token", () => A.admin), unauthorized]],
  },
  {
    // The API's description is public and holds no organization's data, whoever asks.
    method: "GET",
    route: "/v1/openapi.json",
    path: () => "/v1/openapi.json",
    cases: () => [[none, "own"], ...malformed.map((c): [Credential, Expect] => [c, "own"]), [bearer("an admin member token", () => A.admin), "own"]],
  },
  { method: "POST", route: "/v1/tokens", path: () => "/v1/tokens", body: () => ({ kind: "member", role: "admin" }), cases: () => memberOwn("admin") },
  { method: "GET", route: "/v1/tokens", path: () => "/v1/tokens", cases: () => memberOwn("admin") },
  { method: "DELETE", route: "/v1/tokens/:id", path: () => `/v1/tokens/${A.registrationId}`, cases: () => memberOfA("admin") },
  { method: "POST", route: "/v1/orgs/current/callback-secret/rotate", path: () => "/v1/orgs/current/callback-secret/rotate", body: () => ({}), cases: () => memberOwn("admin") },
  { method: "POST", route: "/v1/runs", path: () => "/v1/runs", body: () => runBody(), cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/runs", path: () => "/v1/runs", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/queue", path: () => "/v1/queue", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/runs/:id", path: () => `/v1/runs/${runId()}`, cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/runs/:id/cancel", path: () => `/v1/runs/${runId()}/cancel`, body: () => ({ reason: "intruder" }), cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/runs/:id/pause", path: () => `/v1/runs/${runId()}/pause`, body: () => ({ reason: "intruder" }), cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/runs/:id/resume", path: () => `/v1/runs/${runId()}/resume`, body: () => ({}), cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/runs/:id/events", path: () => `/v1/runs/${runId()}/events`, cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/runs/:id/deliveries", path: () => `/v1/runs/${runId()}/deliveries`, cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/runs/:id/deliveries/:kind/retry", path: () => `/v1/runs/${runId()}/deliveries/pr_comment/retry`, body: () => ({}), cases: () => memberOfA("admin") },
  { method: "GET", route: "/v1/runs/:id/events/stream", path: () => `/v1/runs/${runId()}/events/stream`, cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/runs/:id/events/redeliver", path: () => `/v1/runs/${runId()}/events/redeliver`, body: () => ({}), cases: () => memberOfA("admin") },
  { method: "POST", route: "/v1/runs/:id/callback/redeliver", path: () => `/v1/runs/${runId()}/callback/redeliver`, body: () => ({}), cases: () => memberOfA("admin") },
  { method: "GET", route: "/v1/runners", path: () => "/v1/runners", cases: () => memberOwn("member") },
  { method: "DELETE", route: "/v1/runners/:id", path: () => `/v1/runners/${A.m1.machineId}`, cases: () => memberOfA("admin") },
  {
    method: "POST",
    route: "/v1/runners/register",
    path: () => "/v1/runners/register",
    body: () => ({ name: "intruder", labels: [], protocols: ["process"], cli_version: CLI_VERSION }),
    cases: () => [
      [none, unauthorized],
      ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
      [bearer("a member token", () => A.admin), unauthorized],
      [bearer("a machine token", () => A.m1.token), unauthorized],
      ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
      [bearer("another organization's registration token", () => B.registration), "own"],
    ],
  },
  ...(["heartbeat", "claim", "claim/cancel"] as const).map(
    (what): Endpoint => ({
      method: "POST",
      route: `/v1/runners/${what}`,
      path: () => `/v1/runners/${what}`,
      body: () => (what === "claim/cancel" ? {} : { cli_version: CLI_VERSION, protocols: ["process"], ...(what === "claim" ? { wait_ms: 0 } : {}) }),
      cases: () => [
        [none, unauthorized],
        ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
        [bearer("a member token", () => A.admin), unauthorized],
        [bearer("a registration token", () => A.registration), unauthorized],
        [bearer("a run-attempt token", () => A.token2), unauthorized],
        ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
        [bearer("another organization's machine token", () => B.machine.token), "own"],
      ],
    }),
  ),
  ...attemptCall("launched", () => ({ sandbox_id: "sbx-intruder" })),
  ...attemptCall("lease", () => ({})),
  ...attemptCall("launch-failed", () => ({ error: "intruder" })),
  ...attemptCall("stopped", () => ({ reason: "intruder" })),
  ...attemptCall("push-credential", () => ({})),
  ...attemptCall("pushed", () => ({ branch: "docket/intruder", head_sha: "f".repeat(40) })),
  ...attemptCall("checkpoint-unusable", () => ({ reason: "intruder" })),
  {
    method: "POST",
    route: "/v1/runs/:id/attempts/:n/checkpoint",
    path: () => `/v1/runs/${runId()}/attempts/2/checkpoint`,
    body: () => ({ patch: "intruder" }),
    cases: () => [
      [none, unauthorized],
      ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
      [bearer("a run-attempt token that was never issued", () => `dkt_a_${"cd".repeat(32)}`), unauthorized],
      [bearer("the holder's machine token", () => A.m2.token), unauthorized],
      [bearer("a member token", () => A.admin), unauthorized],
      ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
      [bearer("another organization's run-attempt token", () => B.attemptToken), unauthorized],
      [bearer("the old attempt's token, for the current attempt", () => A.token1), unauthorized],
    ],
  },
  {
    method: "POST",
    route: "/v1/runs/:id/attempts/:n/checkpoint",
    path: () => `/v1/runs/${runId()}/attempts/1/checkpoint`,
    note: "the old attempt",
    body: () => ({ patch: "intruder" }),
    cases: () => [[bearer("the old attempt's token", () => A.token1), { status: 409, code: "stale_attempt" }]],
  },
  {
    method: "POST",
    route: "/v1/runs/:id/reports",
    path: () => `/v1/runs/${runId()}/reports`,
    body: () => ({ phase: "verifying", lines: ["intruder"], final: { outcome: "failed", error: "intruder" } }),
    cases: () => [
      [none, unauthorized],
      ...malformed.map((c): [Credential, Expect] => [c, unauthorized]),
      [bearer("a run-attempt token that was never issued", () => `dkt_a_${"cd".repeat(32)}`), unauthorized],
      [bearer("the holder's machine token", () => A.m2.token), unauthorized],
      [bearer("a member token", () => A.admin), unauthorized],
      ...dead().map((c): [Credential, Expect] => [c, unauthorized]),
      [bearer("another organization's run-attempt token", () => B.attemptToken), unauthorized],
      [bearer("the old attempt's token", () => A.token1), { status: 409, code: "stale_attempt" }],
    ],
  },
  {
    method: "POST",
    route: "/v1/runs/:id/reports",
    path: () => `/v1/runs/${A.jobRun}/reports`,
    note: "another run",
    body: () => ({ final: { outcome: "failed", error: "intruder" } }),
    cases: () => [[bearer("another run's current run-attempt token", () => A.token2), unauthorized]],
  },
  { method: "GET", route: "/v1/credits", path: () => "/v1/credits", cases: () => memberOwn("member") },
  { method: "POST", route: "/v1/credits/grants", path: () => "/v1/credits/grants", body: () => ({ amount_cents: 1_000_000 }), cases: () => memberOwn("admin") },
  { method: "GET", route: "/v1/credits/audit", path: () => "/v1/credits/audit", cases: () => memberOwn("member") },
  {
    method: "POST",
    route: "/v1/projects",
    path: () => "/v1/projects",
    body: () => ({ name: "intruder", source_url: "https://github.com/intruder/repo", launch: { command: ["x"] } }),
    cases: () => memberOwn("member"),
  },
  { method: "GET", route: "/v1/projects", path: () => "/v1/projects", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/projects/:id", path: () => `/v1/projects/${A.projectId}`, cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/projects/:id/license", path: () => `/v1/projects/${A.projectId}/license`, body: () => ({ license: "GPL", accepted: true }), cases: () => memberOfA("owner") },
  { method: "POST", route: "/v1/projects/:id/requests", path: () => `/v1/projects/${A.projectId}/requests`, body: () => ({ title: "intruder" }), cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/build-requests", path: () => "/v1/build-requests", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/build-requests/:id", path: () => `/v1/build-requests/${A.requestId}`, cases: () => memberOfA("member") },
  {
    method: "PUT",
    route: "/v1/build-requests/:id/plan",
    path: () => `/v1/build-requests/${A.requestId}/plan`,
    body: () => ({ pinned_commit: "0".repeat(40), migration_plan: "intruder", chain_target: "mainnet" }),
    cases: () => memberOfA("owner"),
  },
  { method: "POST", route: "/v1/build-requests/:id/dispatch", path: () => `/v1/build-requests/${A.requestId}/dispatch`, body: () => ({}), cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/build-jobs", path: () => "/v1/build-jobs", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/build-jobs/:id", path: () => `/v1/build-jobs/${A.jobId}`, cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/build-jobs/:id/artifact", path: () => `/v1/build-jobs/${A.jobId}/artifact`, cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/build-jobs/:id/reconcile", path: () => `/v1/build-jobs/${A.jobId}/reconcile`, body: () => ({ action: "release" }), cases: () => memberOfA("admin") },
  { method: "POST", route: "/v1/build-jobs/:id/resolve", path: () => `/v1/build-jobs/${A.jobId}/resolve`, body: () => ({ cost_cents: 0, note: "intruder" }), cases: () => memberOfA("admin") },
  { method: "POST", route: "/v1/autopilot/projects", path: () => "/v1/autopilot/projects", body: () => autopilotBody("intruder/repo"), cases: () => memberOwn("admin") },
  { method: "GET", route: "/v1/autopilot/projects", path: () => "/v1/autopilot/projects", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/autopilot/projects/:id", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}`, cases: () => memberOfA("member") },
  {
    method: "PATCH",
    route: "/v1/autopilot/projects/:id",
    path: () => `/v1/autopilot/projects/${A.autopilotProjectId}`,
    body: () => ({ name: "intruder", webhook_secret: "intruder-webhook-secret" }),
    cases: () => memberOfA("admin"),
  },
  {
    // Public: only a valid X-Hub-Signature-256 authenticates it, never a bearer token.
    method: "POST",
    route: "/v1/autopilot/projects/:id/webhook",
    path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/webhook`,
    body: () => ({ action: "labeled" }),
    cases: () => [[none, unauthorized], ...malformed.map((c): [Credential, Expect] => [c, unauthorized]), [bearer("an admin member token", () => A.admin), unauthorized], [bearer("another organization's admin token", () => B.admin), unauthorized]],
  },
  { method: "POST", route: "/v1/autopilot/projects/:id/reconcile", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/reconcile`, cases: () => memberOfA("admin") },
  { method: "GET", route: "/v1/autopilot/projects/:id/scheduler", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/scheduler`, cases: () => memberOfA("member") },
  { method: "PATCH", route: "/v1/autopilot/projects/:id/scheduler", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/scheduler`, body: () => ({ concurrency: 1 }), cases: () => memberOfA("admin") },
  ...(["enable", "disable", "drain"] as const).map((command): Endpoint => ({
    method: "POST",
    route: `/v1/autopilot/projects/:id/scheduler/${command}`,
    path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/scheduler/${command}`,
    body: () => ({}),
    cases: () => memberOfA("admin"),
  })),
  { method: "GET", route: "/v1/autopilot/projects/:id/tickets", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/tickets`, cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/autopilot/projects/:id/reservations", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/reservations`, cases: () => memberOfA("member") },
  {
    method: "POST",
    route: "/v1/autopilot/projects/:id/reservations/:run_id/resolve",
    path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/reservations/${A.run}/resolve`,
    body: () => ({ cost_cents: 0, note: "intruder" }),
    cases: () => memberOfA("admin"),
  },
  { method: "GET", route: "/v1/autopilot/projects/:id/tickets/:number", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/tickets/1`, cases: () => memberOfA("member") },
  {
    method: "POST",
    route: "/v1/build-callbacks/:token",
    path: () => `/v1/build-callbacks/cb_${"0".repeat(48)}`,
    note: "an unknown callback",
    body: () => ({}),
    cases: () => [[none, notFound], [bearer("another organization's admin token", () => B.admin), notFound]],
  },
];

/** What A's ids look like in an answer: another organization's answer contains none of them. */
function victimIds(): string[] {
  return [A.orgId, A.run, A.jobRun, A.projectId, A.requestId, A.jobId, A.m1.machineId, A.m2.machineId, A.registrationId, A.autopilotProjectId];
}

describe("the security matrix", () => {
  it("covers every route the app serves", () => {
    const served = new Set(app.routes.filter((r) => r.path.startsWith("/v1/") && r.method !== "ALL").map((r) => `${r.method} ${r.path}`));
    const covered = new Set(endpoints.map((e) => `${e.method} ${e.route}`));
    expect([...served].filter((r) => !covered.has(r))).toEqual([]);
    expect([...covered].filter((r) => !served.has(r))).toEqual([]);
  });

  for (const endpoint of endpoints) {
    for (const [credential, expected] of endpoint.cases()) {
      const label = expected === "own" ? "acts in its own organization only" : `${expected.status} ${expected.code}`;
      it(`${endpoint.method} ${endpoint.route}${endpoint.note ? ` (${endpoint.note})` : ""} with ${credential.name}: ${label}, and A is unchanged`, async () => {
        await leavesVictimUnchanged(async () => {
          const headers: Record<string, string> = {};
          const auth = credential.header();
          if (auth !== undefined) headers.Authorization = auth;
          const body = endpoint.body?.();
          if (body !== undefined) headers["Content-Type"] = "application/json";
          const res = await send(new Request(`http://docket.test${endpoint.path()}`, { method: endpoint.method, headers, body: body === undefined ? undefined : JSON.stringify(body) }));
          if (expected === "own") {
            expect(res.status, res.text).toBeLessThan(300);
            for (const id of victimIds()) expect(res.text).not.toContain(id);
          } else {
            expect(res.status, res.text).toBe(expected.status);
            expect(res.headers.get("Content-Type") ?? "").toContain("application/json");
            expect(res.body.error?.code, res.text).toBe(expected.code);
            expect(typeof res.body.error?.message).toBe("string");
          }
        });
      });
    }
  }

  it("another organization's Idempotency-Key space is its own: the same key makes its own run, never replays A's", async () => {
    await leavesVictimUnchanged(async () => {
      const res = await call("POST", "/v1/runs", { token: B.admin, body: runBody(), headers: { "Idempotency-Key": "victim-run" } });
      expect(res.status).toBe(201);
      expect(res.body.id).not.toBe(A.run);
      expect(res.body.org_id).toBe(B.orgId);
    });
  });
});

// ---- the dashboard (/dash): the same boundary, with the token in a session cookie ----------------

type PageExpect = "sign-in" | "ended" | "own" | 403 | 404;
interface DashCredential {
  name: string;
  cookie: () => string | undefined;
}
interface DashPage {
  method: "GET" | "POST";
  route: string;
  path: () => string;
  /** Needs an admin member token in the API it calls. */
  admin?: boolean;
  /** Names one of A's resources (else it lists the caller's own). */
  ofA?: boolean;
  /** The form posted (else an intruder's `reason`). */
  form?: string;
}

const cookieOf = (name: string, token: () => string): DashCredential => ({ name, cookie: () => `docket_session=${token()}` });
const dashPages: DashPage[] = [
  { method: "GET", route: "/dash", path: () => "/dash" },
  { method: "GET", route: "/dash/runs", path: () => "/dash/runs" },
  { method: "GET", route: "/dash/runs/:id", path: () => `/dash/runs/${A.run}`, ofA: true },
  { method: "GET", route: "/dash/runs/:id/events/stream", path: () => `/dash/runs/${A.run}/events/stream`, ofA: true },
  { method: "POST", route: "/dash/runs/:id/cancel", path: () => `/dash/runs/${A.run}/cancel`, ofA: true },
  { method: "POST", route: "/dash/runs/:id/redeliver", path: () => `/dash/runs/${A.run}/redeliver`, ofA: true, admin: true },
  { method: "GET", route: "/dash/runners", path: () => "/dash/runners" },
  { method: "GET", route: "/dash/runners/:id", path: () => `/dash/runners/${A.m1.machineId}`, ofA: true },
  { method: "POST", route: "/dash/runners/:id/revoke", path: () => `/dash/runners/${A.m1.machineId}/revoke`, ofA: true, admin: true },
  { method: "GET", route: "/dash/credits", path: () => "/dash/credits" },
  { method: "GET", route: "/dash/tokens", path: () => "/dash/tokens", admin: true },
  { method: "GET", route: "/dash/tokens/:id", path: () => `/dash/tokens/${A.registrationId}`, ofA: true, admin: true },
  { method: "POST", route: "/dash/tokens/:id/revoke", path: () => `/dash/tokens/${A.registrationId}/revoke`, ofA: true, admin: true },
  // A well-formed resolution, so what refuses it is the boundary, not the form's validation.
  { method: "POST", route: "/dash/build-jobs/:id/resolve", path: () => `/dash/build-jobs/${A.jobId}/resolve`, ofA: true, admin: true, form: "cost_cents=1&note=intruder" },
  {
    method: "POST",
    route: "/dash/autopilot/projects/:id/reservations/:run/resolve",
    path: () => `/dash/autopilot/projects/${A.autopilotProjectId}/reservations/${A.run}/resolve`,
    ofA: true,
    admin: true,
    form: "cost_cents=1&note=intruder",
  },
];
/** Pages anyone may open: the sign-in form and sign-out. */
const PUBLIC_DASH = ["GET /dash/sign-in", "POST /dash/sign-in", "POST /dash/sign-out"];

function dashCases(p: DashPage): [DashCredential, PageExpect][] {
  const cases: [DashCredential, PageExpect][] = [
    [{ name: "no cookie", cookie: () => undefined }, "sign-in"],
    [{ name: "a malformed token", cookie: () => "docket_session=dkt_m_not-a-token" }, "ended"],
    [cookieOf("a machine token", () => A.m2.token), "ended"],
    [cookieOf("a revoked admin token", () => A.revokedAdmin), "ended"],
    [cookieOf("another organization's admin token", () => B.admin), p.ofA ? 404 : "own"],
  ];
  // The token list answers a plain member why it is not shown (200); its actions and token pages are 403.
  if (p.admin && p.route !== "/dash/tokens") cases.push([cookieOf("a member without the role", () => A.member), 403]);
  return cases;
}

describe("the security matrix of the dashboard", () => {
  it("covers every dashboard route the app serves", () => {
    const served = new Set(app.routes.filter((r) => r.path.startsWith("/dash") && r.method !== "ALL").map((r) => `${r.method} ${r.path}`));
    const covered = new Set([...dashPages.map((p) => `${p.method} ${p.route}`), ...PUBLIC_DASH]);
    expect([...served].filter((r) => !covered.has(r))).toEqual([]);
    expect([...covered].filter((r) => !served.has(r))).toEqual([]);
  });

  for (const p of dashPages) {
    for (const [credential, expected] of dashCases(p)) {
      it(`${p.method} ${p.route} with ${credential.name}: ${expected}, and A is unchanged`, async () => {
        await leavesVictimUnchanged(async () => {
          const headers: Record<string, string> = {};
          const cookie = credential.cookie();
          if (cookie) headers.Cookie = cookie;
          if (p.method === "POST") {
            headers["Content-Type"] = "application/x-www-form-urlencoded";
            headers.Origin = "http://docket.test";
          }
          const res = await send(new Request(`http://docket.test${p.path()}`, { method: p.method, headers, body: p.method === "POST" ? (p.form ?? "reason=intruder") : undefined, redirect: "manual" }));
          if (expected === "sign-in" || expected === "ended") {
            expect(res.status, res.text).toBe(303);
            expect(res.headers.get("Location")).toBe(expected === "sign-in" ? "/dash/sign-in" : "/dash/sign-in?ended=1");
            // A token that stopped working loses its cookie.
            if (expected === "ended") expect(res.headers.get("Set-Cookie")).toMatch(/^docket_session=;.*Max-Age=0/);
          } else if (expected === "own") {
            expect(res.status, res.text).toBe(200);
            for (const id of victimIds()) expect(res.text).not.toContain(id);
          } else {
            expect(res.status, res.text).toBe(expected);
          }
        });
      });
    }
  }
});
