// The security matrix: every endpoint of docs/protocol.md against no token, malformed tokens, a
// token of the wrong kind, another organization's token, another machine's token, an old attempt's
// token and a member without the role. Each gets its structured error (or, for a caller acting in
// its own organization, only its own data), and a read-back of the victim organization — every D1
// row it owns, its runs, their events and its build job — shows nothing changed
// (../shared/DESIGN.md, invariants 4 and 8; docs/protocol.md, "Errors").

import { beforeAll, describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { sha256Hex } from "../../src/lib/crypto";
import { acceptLicense, createProject, createRequest, dispatchBuild, grantCredit, savePlan } from "./builds-helpers";
import { callDirect, send } from "./direct";
import { pageRequest, sessionCookie } from "./dashboard-helpers";
import { ADMIN_SECRET, ageRun, call, CLI_VERSION, createOrg, registerRunner, runBody } from "./helpers";
import { muteTransitionLogs } from "./quiet";
import { orgState } from "./read-back";
import { installRealAutopilotWithTracker, PRIVATE_KEY } from "./autopilot-fakes";
import { installFakeContainers } from "./managed-fakes";


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
  managedPoolId: string;
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
  // A managed runner pool, stopped: its containers are stand-ins (test/workers/managed-fakes.ts).
  installFakeContainers();
  const pool = await call("POST", "/v1/managed/pools", { token: A.admin, body: { name: "victim-pool", labels: ["gpu"], max_instances: 1, state: "stopped" } });
  expect(pool.status).toBe(201);
  A.managedPoolId = pool.body.id;

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

/**
 * Runs `call` (the request and its assertions) and checks that it left A as it found it. After a
 * set-up that changed A on purpose (`readBefore`: a sign-in opens a session in A), A is read again first.
 */
async function leavesVictimUnchanged(call: () => Promise<void>, opts: { readBefore?: boolean } = {}): Promise<void> {
  const before = (!opts.readBefore && lastRead) || (await victimState());
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
  { method: "GET", route: "/v1/tokens/:id", path: () => `/v1/tokens/${A.registrationId}`, cases: () => memberOfA("admin") },
  { method: "PATCH", route: "/v1/tokens/:id", path: () => `/v1/tokens/${A.registrationId}`, body: () => ({ name: "intruder" }), cases: () => memberOfA("admin") },
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
  { method: "GET", route: "/v1/runners/:id", path: () => `/v1/runners/${A.m1.machineId}`, cases: () => memberOfA("member") },
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
  {
    // Public: only a fresh Linear-Signature of a Linear project authenticates it, never a bearer token.
    method: "POST",
    route: "/v1/autopilot/projects/:id/linear/webhook",
    path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/linear/webhook`,
    body: () => ({ action: "update", type: "Issue", webhookTimestamp: Date.now() }),
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
  { method: "GET", route: "/v1/autopilot/projects/:id/runs", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/runs`, cases: () => memberOfA("member") },
  { method: "GET", route: "/v1/autopilot/projects/:id/reservations", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/reservations`, cases: () => memberOfA("member") },
  {
    method: "POST",
    route: "/v1/autopilot/projects/:id/reservations/:run_id/resolve",
    path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/reservations/${A.run}/resolve`,
    body: () => ({ cost_cents: 0, note: "intruder" }),
    cases: () => memberOfA("admin"),
  },
  { method: "GET", route: "/v1/autopilot/projects/:id/tickets/:number", path: () => `/v1/autopilot/projects/${A.autopilotProjectId}/tickets/1`, cases: () => memberOfA("member") },
  { method: "POST", route: "/v1/managed/pools", path: () => "/v1/managed/pools", body: () => ({ name: "intruder", max_instances: 1, state: "stopped" }), cases: () => memberOwn("admin") },
  { method: "GET", route: "/v1/managed/pools", path: () => "/v1/managed/pools", cases: () => memberOwn("member") },
  { method: "GET", route: "/v1/managed/pools/:id", path: () => `/v1/managed/pools/${A.managedPoolId}`, cases: () => memberOfA("member") },
  { method: "PATCH", route: "/v1/managed/pools/:id", path: () => `/v1/managed/pools/${A.managedPoolId}`, body: () => ({ max_instances: 2 }), cases: () => memberOfA("admin") },
  ...(["start", "stop"] as const).map((command): Endpoint => ({
    method: "POST",
    route: `/v1/managed/pools/:id/${command}`,
    path: () => `/v1/managed/pools/${A.managedPoolId}/${command}`,
    body: () => ({}),
    cases: () => memberOfA("admin"),
  })),
  { method: "DELETE", route: "/v1/managed/pools/:id", path: () => `/v1/managed/pools/${A.managedPoolId}`, cases: () => memberOfA("admin") },
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
  return [A.orgId, A.run, A.jobRun, A.projectId, A.requestId, A.jobId, A.m1.machineId, A.m2.machineId, A.registrationId, A.autopilotProjectId, A.managedPoolId];
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

// ---- the dashboard (/dash): the same boundary, through sign-in and its session ------------------
// A token signs in at the form, which opens a session; the cookie holds only the session's random
// id (src/dashboard/session.ts). So a credential is tried the way a browser would bring it: a
// token that cannot sign in is refused there and then sent in the cookie as it is (the cookie
// before sessions); a token that signs in brings the session it opened.

type PageExpect = "sign-in" | "ended" | "own" | 403 | 404;
interface DashCredential {
  name: string;
  /** A token the sign-in form refuses; the page then gets it in the cookie as it is. */
  refused?: () => string;
  /** The cookie, when making it changes nothing of A's. */
  cookie?: () => string;
  /** The cookie, made before A is read (a sign-in opens a session in the signer's organization). */
  setUp?: () => Promise<string>;
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
  form?: Record<string, string>;
}

const resolutionForm = { cost_cents: "1", note: "intruder" };
const newProjectForm = {
  name: "intruder-autopilot",
  repository: "intruder/dash",
  tracker: "github",
  command: "node agent.mjs",
  webhook_secret: "intruder-webhook-secret",
  app_id: "1",
  installation_id: "2",
  private_key: PRIVATE_KEY,
};
const dashPages: DashPage[] = [
  { method: "GET", route: "/dash", path: () => "/dash" },
  { method: "GET", route: "/dash/runs", path: () => "/dash/runs" },
  { method: "GET", route: "/dash/runs/:id", path: () => `/dash/runs/${A.run}`, ofA: true },
  { method: "GET", route: "/dash/runs/:id/events/stream", path: () => `/dash/runs/${A.run}/events/stream`, ofA: true },
  { method: "POST", route: "/dash/runs/:id/cancel", path: () => `/dash/runs/${A.run}/cancel`, ofA: true, form: { reason: "intruder", confirm: "yes" } },
  { method: "POST", route: "/dash/runs/:id/pause", path: () => `/dash/runs/${A.run}/pause`, ofA: true },
  { method: "POST", route: "/dash/runs/:id/resume", path: () => `/dash/runs/${A.run}/resume`, ofA: true },
  { method: "POST", route: "/dash/runs/:id/redeliver", path: () => `/dash/runs/${A.run}/redeliver`, ofA: true, admin: true },
  { method: "GET", route: "/dash/runners", path: () => "/dash/runners" },
  { method: "GET", route: "/dash/runners/:id", path: () => `/dash/runners/${A.m1.machineId}`, ofA: true },
  { method: "POST", route: "/dash/runners/:id/revoke", path: () => `/dash/runners/${A.m1.machineId}/revoke`, ofA: true, admin: true, form: { confirm: "yes" } },
  { method: "GET", route: "/dash/credits", path: () => "/dash/credits" },
  { method: "GET", route: "/dash/autopilot", path: () => "/dash/autopilot" },
  { method: "GET", route: "/dash/autopilot/new", path: () => "/dash/autopilot/new", admin: true },
  // A whole form, so what refuses it is the boundary, not the API's validation.
  { method: "POST", route: "/dash/autopilot", path: () => "/dash/autopilot", admin: true, form: newProjectForm },
  { method: "GET", route: "/dash/autopilot/:id", path: () => `/dash/autopilot/${A.autopilotProjectId}`, ofA: true },
  { method: "GET", route: "/dash/autopilot/:id/tickets/:number", path: () => `/dash/autopilot/${A.autopilotProjectId}/tickets/1`, ofA: true },
  { method: "POST", route: "/dash/autopilot/:id/scheduler/:command", path: () => `/dash/autopilot/${A.autopilotProjectId}/scheduler/disable`, ofA: true, admin: true, form: { confirm: "yes" } },
  { method: "POST", route: "/dash/autopilot/:id/runs/:run/deliveries/:kind/retry", path: () => `/dash/autopilot/${A.autopilotProjectId}/runs/${A.run}/deliveries/blocker_comment/retry`, ofA: true, admin: true },
  { method: "GET", route: "/dash/tokens", path: () => "/dash/tokens", admin: true },
  { method: "GET", route: "/dash/tokens/:id", path: () => `/dash/tokens/${A.registrationId}`, ofA: true, admin: true },
  { method: "POST", route: "/dash/tokens", path: () => "/dash/tokens", admin: true, form: { kind: "registration", name: "intruder-dash" } },
  { method: "POST", route: "/dash/tokens/:id/rename", path: () => `/dash/tokens/${A.registrationId}/rename`, ofA: true, admin: true, form: { name: "intruder" } },
  // Confirmed, so what refuses it is the boundary, not the missing confirmation.
  { method: "POST", route: "/dash/tokens/:id/revoke", path: () => `/dash/tokens/${A.registrationId}/revoke`, ofA: true, admin: true, form: { confirm: "yes" } },
  // A well-formed resolution, so what refuses it is the boundary, not the form's validation.
  { method: "POST", route: "/dash/build-jobs/:id/resolve", path: () => `/dash/build-jobs/${A.jobId}/resolve`, ofA: true, admin: true, form: resolutionForm },
  { method: "GET", route: "/dash/managed", path: () => "/dash/managed" },
  { method: "POST", route: "/dash/managed/pools", path: () => "/dash/managed/pools", admin: true, form: { name: "intruder-dash", max_instances: "1" } },
  { method: "POST", route: "/dash/managed/pools/:id/update", path: () => `/dash/managed/pools/${A.managedPoolId}/update`, ofA: true, admin: true, form: { max_instances: "2" } },
  { method: "POST", route: "/dash/managed/pools/:id/start", path: () => `/dash/managed/pools/${A.managedPoolId}/start`, ofA: true, admin: true },
  // Confirmed, so what refuses them is the boundary, not the missing confirmation.
  { method: "POST", route: "/dash/managed/pools/:id/stop", path: () => `/dash/managed/pools/${A.managedPoolId}/stop`, ofA: true, admin: true, form: { confirm: "yes" } },
  { method: "POST", route: "/dash/managed/pools/:id/delete", path: () => `/dash/managed/pools/${A.managedPoolId}/delete`, ofA: true, admin: true, form: { confirm: "yes" } },
  {
    method: "POST",
    route: "/dash/autopilot/projects/:id/reservations/:run/resolve",
    path: () => `/dash/autopilot/projects/${A.autopilotProjectId}/reservations/${A.run}/resolve`,
    ofA: true,
    admin: true,
    form: resolutionForm,
  },
];
/**
 * Routes anyone may open, before any session check: the sign-in form, sign-out (which ends only the
 * session its cookie names) and the pages' scripts, which hold nothing of any organization's.
 */
const PUBLIC_DASH = ["GET /dash/sign-in", "POST /dash/sign-in", "POST /dash/sign-out", "GET /dash/assets/:file"];

const signInAnswer = (token: string) => send(pageRequest("/dash/sign-in", { form: { token } }));
const signedIn = async (token: string) => sessionCookie(await signInAnswer(token));
/** A cookie of the right shape that names no session this deployment opened. */
const FORGED_SESSION = `docket_session=${"5e".repeat(32)}`;

/** A token that cannot sign in: the form refuses it and opens no session; the page gets the token itself as its cookie. */
const refusedToken = (name: string, token: () => string): DashCredential => ({ name, refused: token, cookie: () => `docket_session=${token()}` });
/** A session `token` opened at the form. */
const sessionOf = (name: string, token: () => string): DashCredential => ({ name, setUp: () => signedIn(token()) });

/** A session of one of A's admin tokens that worked for a page, and whose token A then revoked. */
async function sessionOfRevokedToken(): Promise<string> {
  const token = (await callDirect("POST", "/v1/tokens", { token: A.admin, body: { kind: "member", role: "admin" } })).body;
  const cookie = await signedIn(token.token);
  expect((await send(pageRequest("/dash/tokens", { cookie }))).status).toBe(200);
  expect((await callDirect("DELETE", `/v1/tokens/${token.id}`, { token: A.admin })).status).toBe(200);
  return cookie;
}

/** The id of one of A's admin sessions as D1 stores it (its SHA-256 hash), put in a cookie. */
async function storedHashOfASession(): Promise<string> {
  const cookie = await signedIn(A.admin);
  return `docket_session=${await sha256Hex(cookie.split("=")[1])}`;
}

function dashCases(p: DashPage): [DashCredential, PageExpect][] {
  const cases: [DashCredential, PageExpect][] = [
    [{ name: "no cookie" }, "sign-in"],
    [refusedToken("a malformed token", () => "dkt_m_not-a-token"), "ended"],
    [refusedToken("a machine token", () => A.m2.token), "ended"],
    [refusedToken("a revoked admin token", () => A.revokedAdmin), "ended"],
    [{ name: "a working admin token in the cookie itself", cookie: () => `docket_session=${A.admin}` }, "ended"],
    [{ name: "a forged session id", cookie: () => FORGED_SESSION }, "ended"],
    [{ name: "the stored hash of one of A's sessions", setUp: storedHashOfASession }, "ended"],
    [{ name: "a session whose token was revoked after sign-in", setUp: sessionOfRevokedToken }, "ended"],
    [sessionOf("another organization's admin token", () => B.admin), p.ofA ? 404 : "own"],
  ];
  // The token list answers a plain member why it is not shown (200); its actions and token pages are 403.
  if (p.admin && `${p.method} ${p.route}` !== "GET /dash/tokens") cases.push([sessionOf("a member without the role", () => A.member), 403]);
  return cases;
}

/** The sign-in form refuses `token` with its reason, and sets no cookie. */
async function expectSignInRefused(token: string): Promise<void> {
  const res = await signInAnswer(token);
  expect(res.status, res.text).toBe(401);
  expect(res.text).toContain("That token does not sign in");
  expect(res.headers.get("Set-Cookie")).toBeNull();
}

function expectPageAnswer(res: Awaited<ReturnType<typeof send>>, expected: PageExpect): void {
  if (expected === "sign-in" || expected === "ended") {
    expect(res.status, res.text).toBe(303);
    expect(res.headers.get("Location")).toBe(expected === "sign-in" ? "/dash/sign-in" : "/dash/sign-in?ended=unknown");
    // A cookie that names no working session is cleared.
    if (expected === "ended") expect(res.headers.get("Set-Cookie")).toMatch(/^docket_session=;.*Max-Age=0/);
  } else if (expected === "own") {
    // A page (200), or a form that acted in the caller's own organization and goes back to its page (303).
    expect([200, 303], res.text).toContain(res.status);
    if (res.status === 303) expect(res.headers.get("Location")).not.toContain("/dash/sign-in");
    for (const id of victimIds()) expect(res.text).not.toContain(id);
  } else {
    expect(res.status, res.text).toBe(expected);
  }
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
        const cookie = credential.setUp ? await credential.setUp() : credential.cookie?.();
        await leavesVictimUnchanged(
          async () => {
            if (credential.refused) await expectSignInRefused(credential.refused());
            const form = p.method === "POST" ? (p.form ?? { reason: "intruder" }) : undefined;
            expectPageAnswer(await send(pageRequest(p.path(), { cookie, form })), expected);
          },
          { readBefore: credential.setUp !== undefined },
        );
      });
    }
  }

  it("the pages' scripts are public and the same for any cookie: none is ended or cleared there, none learns A's data, and A is unchanged", async () => {
    const cookies = ["", FORGED_SESSION, `docket_session=${A.admin}`, await signedIn(B.admin)];
    await leavesVictimUnchanged(async () => {
      const answers = await Promise.all(cookies.map((cookie) => send(pageRequest("/dash/assets/live-events.js", { cookie }))));
      for (const res of answers) {
        expect(res.status, res.text).toBe(200);
        expect(res.headers.get("Content-Type")).toContain("text/javascript");
        expect(res.headers.get("Set-Cookie")).toBeNull();
        expect(res.text).toBe(answers[0].text);
        for (const id of victimIds()) expect(res.text).not.toContain(id);
      }
      expect((await send(pageRequest("/dash/assets/unknown.js"))).status).toBe(404);
    });
  });
});
