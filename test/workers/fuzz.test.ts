// Input fuzzing: every JSON endpoint gets generated malformed bodies (wrong types, missing and
// unknown fields, huge strings, deep nesting, text that is not JSON, arrays for objects), odd
// headers (Content-Type, Idempotency-Key, Last-Event-ID) and odd path and query parameters. Every
// answer is a 4xx with a structured {"error": {"code", "message"}} whose code maps to its status,
// never a 5xx, and the organization reads back unchanged (../shared/DESIGN.md, "Protocol
// essentials": bad input gets 400 invalid_request naming the field and changes nothing).

import fc from "fast-check";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { DEFAULTS } from "../../src/config";
import { ERROR_STATUS } from "../../src/protocol/errors";
import { acceptLicense, createProject, createRequest, dispatchBuild, grantCredit, savePlan } from "./builds-helpers";
import { send, type Answer } from "./direct";
import { ADMIN_SECRET, ageRun, call, CLI_VERSION, createOrg, registerRunner, runBody } from "./helpers";
import { muteTransitionLogs } from "./quiet";
import { orgState } from "./read-back";

type Json = Record<string, any>;

const SEED = Number(env.MODEL_SEED || 1);
/** Generated inputs per endpoint and kind of malformation. */
const RUNS = 40;

const S = {} as {
  orgId: string;
  admin: string;
  registration: string;
  registrationId: string;
  machine: { machineId: string; token: string };
  run: string;
  attemptToken: string;
  projectId: string;
  requestId: string;
  openRequestId: string;
  jobId: string;
  jobRun: string;
  autopilotProjectId: string;
};

beforeAll(async () => {
  muteTransitionLogs();
  const org = await createOrg("fuzz");
  S.orgId = org.orgId;
  S.admin = org.admin;
  const registration = (await call("POST", "/v1/tokens", { token: S.admin, body: { kind: "registration" } })).body;
  [S.registration, S.registrationId] = [registration.token, registration.id];
  S.machine = await registerRunner(S.admin, { name: "fuzz-box" });
  S.run = (await call("POST", "/v1/runs", { token: S.admin, body: runBody() })).body.id;
  const claimed = await call("POST", "/v1/runners/claim", { token: S.machine.token, body: { cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 0 } });
  expect(claimed.body.run_id).toBe(S.run);
  S.attemptToken = claimed.body.attempt_token;
  expect((await call("POST", `/v1/runs/${S.run}/attempts/1/launched`, { token: S.machine.token, body: { sandbox_id: "sbx-1" } })).status).toBe(200);
  await grantCredit(S.admin, 10_000);
  S.projectId = await createProject(S.admin);
  await acceptLicense(S.admin, S.projectId);
  S.requestId = await createRequest(S.admin, S.projectId, "with a job");
  await savePlan(S.admin, S.requestId);
  const job = await dispatchBuild(S.admin, S.requestId, "fuzz-job");
  expect(job.status).toBe(201);
  S.jobId = job.body.id;
  S.jobRun = job.body.run_id;
  // A planned request without a job: a valid dispatch of it would reserve credit.
  S.openRequestId = await createRequest(S.admin, S.projectId, "without a job");
  await savePlan(S.admin, S.openRequestId);
  const autopilot = await call("POST", "/v1/autopilot/projects", { token: S.admin, body: autopilotBody() });
  expect(autopilot.status).toBe(201);
  S.autopilotProjectId = autopilot.body.id;
  // The run's lease would lapse after a minute of fuzzing; a long one keeps the read-back still.
  await ageRun(S.run, -3_600_000);
});

const state = () => orgState({ orgId: S.orgId, admin: S.admin, runIds: [S.run, S.jobRun], jobIds: [S.jobId] });

// ---- the shape of each JSON endpoint ------------------------------------------------------------

type FieldType = "string" | "int" | "stringArray" | "object" | "record" | "enum" | "true" | "url";
interface Field {
  path: string[];
  type: FieldType;
  required?: boolean;
  nullable?: boolean;
  /** The longest string (or array), or the largest integer, the schema accepts. */
  max?: number;
  /** What a record's values are. */
  of?: "string" | "int";
}

interface JsonEndpoint {
  method: string;
  route: string;
  path: () => string;
  token: () => string;
  /** A body the endpoint accepts; every input sent is this body broken in one way. */
  valid: () => Json;
  fields: Field[];
  idempotencyKey?: "run" | "job";
}

const f = (path: string, type: FieldType, extra: Partial<Field> = {}): Field => ({ path: path.split("."), type, ...extra });

const launchFields = (prefix: string): Field[] => [
  f(prefix, "object", { required: true }),
  f(`${prefix}.protocol`, "string", { max: 32 }),
  f(`${prefix}.command`, "stringArray", { required: true, max: 64 }),
  f(`${prefix}.image`, "string", { nullable: true, max: 500 }),
  f(`${prefix}.env`, "record"),
];

function autopilotBody(): Json {
  const privateKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n";
  return {
    name: "ap",
    repository: "fuzz/app",
    ready_label: "ready",
    review_label: "review",
    brief_heading: "Agent Brief",
    done_labels: ["done"],
    queue_capacity: 5,
    automation_accounts: ["ci-robot"],
    run: { labels: ["linux"], priority: 1, launch: { protocol: "process", command: ["x"], image: null, env: { K: "V" } } },
    webhook_secret: "0123456789abcdef",
    github: { api_url: "https://github.example.com/api/v3", app_id: "1", installation_id: "2", private_key: privateKey },
  };
}

const autopilotFields = (required: boolean): Field[] => [
  f("name", "string", { required, max: 100 }),
  f("repository", "string", { required, max: 140 }),
  f("ready_label", "string", { max: 50 }),
  f("review_label", "string", { max: 50 }),
  f("brief_heading", "string", { max: 100 }),
  f("done_labels", "stringArray", { max: 64 }),
  f("queue_capacity", "int", { max: 10_000 }),
  f("automation_accounts", "stringArray", { max: 100 }),
  f("run", "object", { required }),
  f("run.labels", "stringArray", { max: 64 }),
  f("run.priority", "int", { max: 1_000 }),
  ...(required ? launchFields("run.launch") : []),
  f("webhook_secret", "string", { required, max: 256 }),
  f("github", "object", { required }),
  f("github.api_url", "url", { max: 500 }),
  f("github.app_id", "string", { required, max: 20 }),
  f("github.installation_id", "string", { required, max: 20 }),
  f("github.private_key", "string", { required, max: 16_000 }),
];

const endpoints: JsonEndpoint[] = [
  { method: "POST", route: "/v1/orgs", path: () => "/v1/orgs", token: () => ADMIN_SECRET, valid: () => ({ name: "acme" }), fields: [f("name", "string", { required: true, max: 100 })] },
  {
    method: "POST",
    route: "/v1/tokens",
    path: () => "/v1/tokens",
    token: () => S.admin,
    valid: () => ({ kind: "member", role: "member", name: "x" }),
    fields: [f("kind", "enum", { required: true }), f("role", "enum"), f("name", "string", { max: 100 }), f("expires_in_ms", "int"), f("max_uses", "int", { max: 1_000_000 })],
  },
  { method: "PATCH", route: "/v1/tokens/:id", path: () => `/v1/tokens/${S.registrationId}`, token: () => S.admin, valid: () => ({ name: "rack" }), fields: [f("name", "string", { required: true, max: 100 })] },
  { method: "POST", route: "/v1/orgs/current/callback-secret/rotate", path: () => "/v1/orgs/current/callback-secret/rotate", token: () => S.admin, valid: () => ({}), fields: [] },
  {
    method: "POST",
    route: "/v1/runs",
    path: () => "/v1/runs",
    token: () => S.admin,
    idempotencyKey: "run",
    valid: () => ({
      brief: "fix it",
      repository: { url: "https://github.com/acme/app.git", commit: "4f1c2d3" },
      labels: ["linux"],
      priority: 5,
      launch: { protocol: "process", command: ["node", "agent.mjs"], image: "node:20", env: { K: "V" } },
      callback_url: "https://example.com/cb",
      metadata: { team: "core" },
    }),
    fields: [
      f("brief", "string", { required: true, max: 20_000 }),
      f("repository", "object", { nullable: true }),
      f("repository.url", "string", { required: true, max: 2_000 }),
      f("repository.commit", "string", { nullable: true, max: 64 }),
      f("labels", "stringArray", { max: 32 }),
      f("priority", "int", { max: 1_000 }),
      ...launchFields("launch"),
      f("callback_url", "url", { nullable: true, max: 2_000 }),
      f("metadata", "record"),
    ],
  },
  { method: "POST", route: "/v1/runs/:id/cancel", path: () => `/v1/runs/${S.run}/cancel`, token: () => S.admin, valid: () => ({ reason: "x" }), fields: [f("reason", "string", { max: 1_000 })] },
  { method: "POST", route: "/v1/runs/:id/events/redeliver", path: () => `/v1/runs/${S.run}/events/redeliver`, token: () => S.admin, valid: () => ({ after: 0 }), fields: [f("after", "int", { max: Number.MAX_SAFE_INTEGER })] },
  { method: "POST", route: "/v1/runs/:id/callback/redeliver", path: () => `/v1/runs/${S.run}/callback/redeliver`, token: () => S.admin, valid: () => ({}), fields: [] },
  {
    method: "POST",
    route: "/v1/runners/register",
    path: () => "/v1/runners/register",
    token: () => S.registration,
    valid: () => ({ name: "box", labels: ["linux"], protocols: ["process"], cli_version: CLI_VERSION }),
    fields: [f("name", "string", { required: true, max: 100 }), f("labels", "stringArray", { max: 32 }), f("protocols", "stringArray", { required: true, max: 16 }), f("cli_version", "string", { required: true, max: 64 })],
  },
  {
    method: "POST",
    route: "/v1/runners/heartbeat",
    path: () => "/v1/runners/heartbeat",
    token: () => S.machine.token,
    valid: () => ({ cli_version: CLI_VERSION, protocols: ["process"] }),
    fields: [f("cli_version", "string", { required: true, max: 64 }), f("protocols", "stringArray", { required: true, max: 16 })],
  },
  {
    method: "POST",
    route: "/v1/runners/claim",
    path: () => "/v1/runners/claim",
    token: () => S.machine.token,
    valid: () => ({ cli_version: CLI_VERSION, protocols: ["process"], wait_ms: 0 }),
    fields: [f("cli_version", "string", { required: true, max: 64 }), f("protocols", "stringArray", { required: true, max: 16 }), f("wait_ms", "int", { max: 600_000 })],
  },
  {
    method: "POST",
    route: "/v1/runs/:id/attempts/:n/launched",
    path: () => `/v1/runs/${S.run}/attempts/1/launched`,
    token: () => S.machine.token,
    valid: () => ({ sandbox_id: "sbx-1" }),
    fields: [f("sandbox_id", "string", { required: true, max: 200 })],
  },
  { method: "POST", route: "/v1/runs/:id/attempts/:n/lease", path: () => `/v1/runs/${S.run}/attempts/1/lease`, token: () => S.machine.token, valid: () => ({}), fields: [] },
  {
    method: "POST",
    route: "/v1/runs/:id/attempts/:n/launch-failed",
    path: () => `/v1/runs/${S.run}/attempts/1/launch-failed`,
    token: () => S.machine.token,
    valid: () => ({ error: "pull failed" }),
    fields: [f("error", "string", { required: true, max: 4_000 })],
  },
  {
    method: "POST",
    route: "/v1/runs/:id/attempts/:n/stopped",
    path: () => `/v1/runs/${S.run}/attempts/1/stopped`,
    token: () => S.machine.token,
    valid: () => ({ sandbox_id: "sbx-1", reason: "gone" }),
    fields: [f("sandbox_id", "string", { max: 200 }), f("reason", "string", { max: 4_000 })],
  },
  {
    method: "POST",
    route: "/v1/runs/:id/reports",
    path: () => `/v1/runs/${S.run}/reports`,
    token: () => S.attemptToken,
    valid: () => ({
      phase: "verifying",
      lines: ["ok"],
      final: { outcome: "completed", error: null, exit_codes: { agent: 0 }, artifact: { patch: "diff", source_revision: "abc", model: "m", limitations: ["none"] }, cost_cents: 3 },
    }),
    fields: [
      f("phase", "string", { nullable: true, max: 64 }),
      f("lines", "stringArray", { max: 10_000 }),
      f("final", "object", { nullable: true }),
      f("final.outcome", "enum", { required: true }),
      f("final.error", "string", { nullable: true, max: 4_000 }),
      f("final.exit_codes", "record", { of: "int" }),
      f("final.artifact", "object", { nullable: true }),
      f("final.artifact.patch", "string", { required: true }),
      f("final.artifact.source_revision", "string", { nullable: true, max: 64 }),
      f("final.artifact.model", "string", { nullable: true, max: 200 }),
      f("final.artifact.limitations", "stringArray", { max: 100 }),
      f("final.cost_cents", "int", { nullable: true }),
    ],
  },
  {
    method: "POST",
    route: "/v1/credits/grants",
    path: () => "/v1/credits/grants",
    token: () => S.admin,
    idempotencyKey: "run",
    valid: () => ({ amount_cents: 100, note: "x" }),
    fields: [f("amount_cents", "int", { required: true, max: 100_000_000 }), f("note", "string", { max: 1_000 })],
  },
  {
    method: "POST",
    route: "/v1/projects",
    path: () => "/v1/projects",
    token: () => S.admin,
    valid: () => ({ name: "p", source_url: "https://github.com/acme/app", labels: ["linux"], launch: { protocol: "process", command: ["x"], image: null, env: { K: "V" } } }),
    fields: [f("name", "string", { required: true, max: 200 }), f("source_url", "url", { required: true, max: 2_000 }), f("labels", "stringArray", { max: 32 }), ...launchFields("launch")],
  },
  {
    method: "POST",
    route: "/v1/projects/:id/license",
    path: () => `/v1/projects/${S.projectId}/license`,
    token: () => S.admin,
    valid: () => ({ license: "MIT", accepted: true }),
    fields: [f("license", "string", { required: true, max: 200 }), f("accepted", "true", { required: true })],
  },
  { method: "POST", route: "/v1/projects/:id/requests", path: () => `/v1/projects/${S.projectId}/requests`, token: () => S.admin, valid: () => ({ title: "t" }), fields: [f("title", "string", { required: true, max: 500 })] },
  {
    method: "PUT",
    route: "/v1/build-requests/:id/plan",
    path: () => `/v1/build-requests/${S.openRequestId}/plan`,
    token: () => S.admin,
    valid: () => ({ pinned_commit: "a".repeat(40), migration_plan: "m", chain_target: "base-sepolia" }),
    fields: [f("pinned_commit", "string", { required: true, max: 64 }), f("migration_plan", "string", { required: true, max: 20_000 }), f("chain_target", "string", { required: true, max: 100 })],
  },
  { method: "POST", route: "/v1/build-requests/:id/dispatch", path: () => `/v1/build-requests/${S.openRequestId}/dispatch`, token: () => S.admin, idempotencyKey: "job", valid: () => ({}), fields: [] },
  { method: "POST", route: "/v1/build-jobs/:id/reconcile", path: () => `/v1/build-jobs/${S.jobId}/reconcile`, token: () => S.admin, valid: () => ({ action: "dispatch" }), fields: [f("action", "enum")] },
  {
    method: "POST",
    route: "/v1/build-jobs/:id/resolve",
    path: () => `/v1/build-jobs/${S.jobId}/resolve`,
    token: () => S.admin,
    valid: () => ({ cost_cents: 5, note: "n" }),
    fields: [f("cost_cents", "int", { required: true, max: 100_000_000 }), f("note", "string", { required: true, max: 1_000 })],
  },
  { method: "POST", route: "/v1/autopilot/projects", path: () => "/v1/autopilot/projects", token: () => S.admin, valid: autopilotBody, fields: autopilotFields(true) },
  {
    method: "PATCH",
    route: "/v1/autopilot/projects/:id",
    path: () => `/v1/autopilot/projects/${S.autopilotProjectId}`,
    token: () => S.admin,
    valid: () => {
      const { run, ...body } = autopilotBody();
      return { ...body, repository: "fuzz/app", run: { labels: run.labels, priority: run.priority } };
    },
    fields: autopilotFields(false),
  },
];

// ---- generated malformations --------------------------------------------------------------------

/** A value the field's schema never accepts. */
function wrongValue(field: Field): fc.Arbitrary<unknown> {
  const maybeNull = field.nullable ? [] : [fc.constant(null)];
  const obj = fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { minKeys: 0, maxKeys: 3 });
  const arr = fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 });
  const num = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
  switch (field.type) {
    case "string":
      return fc.oneof(num, fc.boolean(), arr, obj, ...maybeNull);
    case "url":
      return fc.oneof(num, fc.boolean(), arr, obj, fc.constantFrom("not a url", "ftp://example.com/x", "javascript:alert(1)", "//example.com", "https://"), ...maybeNull);
    case "int":
      return fc.oneof(
        fc.string(),
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Number.isInteger(x)),
        fc.constantFrom(-1, -1e21),
        ...(field.max !== undefined ? [fc.constant(field.max + 1), fc.constant(1e21)] : []),
        fc.boolean(),
        arr,
        obj,
        ...maybeNull,
      );
    case "stringArray":
      return fc.oneof(fc.string(), num, fc.boolean(), obj, fc.array(fc.oneof(num, fc.boolean(), obj, fc.constant(null)), { minLength: 1, maxLength: 3 }), ...maybeNull);
    case "object":
    case "record":
      return fc.oneof(
        fc.string(),
        num,
        fc.boolean(),
        arr,
        ...(field.type !== "record" ? [] : field.of === "int" ? [fc.constant({ K: "x" }), fc.constant({ K: 1.5 }), fc.constant({ K: null })] : [fc.constant({ "": "x" }), fc.constant({ K: 1 }), fc.constant({ K: { deep: true } })]),
        ...maybeNull,
      );
    case "enum":
      return fc.oneof(fc.string().filter((s) => !["member", "registration", "admin", "completed", "failed", "dispatch", "release"].includes(s)), num, fc.boolean(), arr, obj, ...maybeNull);
    case "true":
      return fc.oneof(fc.constant(false), fc.constant("true"), fc.constant(1), fc.constant(null), arr, obj);
  }
}

type Broken = { what: string; text: string; field: string | null; contentType?: string };

function setAt(body: Json, path: string[], value: unknown): Json {
  const copy = structuredClone(body);
  let at: Json = copy;
  for (const key of path.slice(0, -1)) {
    if (at[key] === null || typeof at[key] !== "object") at[key] = {};
    at = at[key];
  }
  at[path[path.length - 1]] = value;
  return copy;
}

function removeAt(body: Json, path: string[]): Json {
  const copy = structuredClone(body);
  let at: Json = copy;
  for (const key of path.slice(0, -1)) at = at[key];
  delete at[path[path.length - 1]];
  return copy;
}

const PLACEHOLDER = "\u0000nested\u0000";

/** Every way one body is broken: each names the field the 400 must name (null: any). */
function brokenBodies(e: JsonEndpoint): fc.Arbitrary<Broken> {
  const valid = e.valid();
  const objectPaths = [[], ...e.fields.filter((x) => x.type === "object").map((x) => x.path)];
  const arbs: fc.Arbitrary<Broken>[] = [
    // Text that is not JSON at all.
    fc
      .oneof(
        fc.constantFrom("{", "}", "{\"a\":", "[1,]", "{}x", "'single'", "NaN", "undefined", "{\"a\" 1}", "\u0000", "{\"brief\": undefined}", "nul", "tru"),
        fc.string({ minLength: 1 }).filter((s) => {
          // An empty body is a valid build dispatch; whitespace is empty.
          if (s.trim() === "") return false;
          try {
            JSON.parse(s);
            return false;
          } catch {
            return true;
          }
        }),
      )
      .map((text) => ({ what: "not JSON", text, field: "body" })),
    // JSON, but not an object.
    fc
      .oneof(fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }), fc.integer(), fc.string(), fc.boolean(), fc.constant(null))
      .map((v) => ({ what: "not an object", text: JSON.stringify(v), field: "body" })),
    // An unknown field, at the top or inside a nested object.
    fc
      .tuple(
        fc.constantFrom(...objectPaths),
        fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "", " ", "BRIEF"), fc.string({ maxLength: 10 })),
        fc.jsonValue({ maxDepth: 2 }),
      )
      .filter(([at, key]) => {
        const known = e.fields.filter((x) => x.path.length === at.length + 1 && at.every((k, i) => x.path[i] === k)).map((x) => x.path[at.length]);
        return !known.includes(key);
      })
      .map(([at, key, v]) => {
        // JSON text, so that "__proto__" arrives as a key like any other.
        const text = JSON.stringify(setAt(valid, [...at, PLACEHOLDER], v)).replace(JSON.stringify(PLACEHOLDER), () => JSON.stringify(key));
        return { what: `unknown field ${[...at, key].join(".")}`, text, field: at.length === 0 ? "body" : at.join(".") };
      }),
  ];
  const required = e.fields.filter((x) => x.required);
  if (required.length > 0) {
    arbs.push(fc.constantFrom(...required).map((x) => ({ what: `missing ${x.path.join(".")}`, text: JSON.stringify(removeAt(valid, x.path)), field: x.path.join(".") })));
  }
  if (e.fields.length > 0) {
    arbs.push(
      fc
        .constantFrom(...e.fields)
        .chain((x) => wrongValue(x).map((v) => ({ x, v })))
        .map(({ x, v }) => ({ what: `wrong type for ${x.path.join(".")}: ${JSON.stringify(v)?.slice(0, 60)}`, text: JSON.stringify(setAt(valid, x.path, v)), field: x.path.join(".") })),
    );
    // Deep nesting where a field's value goes.
    arbs.push(
      fc.tuple(fc.constantFrom(...e.fields), fc.integer({ min: 50, max: 50_000 }), fc.boolean()).map(([x, depth, arrays]) => {
        const nested = arrays ? "[".repeat(depth) + "]".repeat(depth) : "{\"a\":".repeat(depth) + "1" + "}".repeat(depth);
        const text = JSON.stringify(setAt(valid, x.path, PLACEHOLDER)).replace(JSON.stringify(PLACEHOLDER), () => nested);
        return { what: `${depth} levels of ${arrays ? "arrays" : "objects"} in ${x.path.join(".")}`, text, field: x.path.join(".") };
      }),
    );
  }
  const bounded = e.fields.filter((x) => (x.type === "string" || x.type === "url" || x.type === "stringArray") && x.max !== undefined);
  if (bounded.length > 0) {
    // Strings (or lists) just past their bound, and some far past it.
    arbs.push(
      fc.tuple(fc.constantFrom(...bounded), fc.oneof(fc.integer({ min: 1, max: 50 }), fc.constant(1_000_000))).map(([x, over]) => {
        const n = x.max! + over;
        const value = x.type === "stringArray" ? Array.from({ length: Math.min(n, x.max! + 50) }, () => "x") : x.type === "url" ? `https://example.com/${"a".repeat(n)}` : "x".repeat(n);
        return { what: `${x.path.join(".")} of ${n}`, text: JSON.stringify(setAt(valid, x.path, value)), field: x.path.join(".") };
      }),
    );
  }
  return fc.oneof(...arbs);
}

/** A Content-Type that is not JSON, sent with a body that is not JSON either. */
const oddContentType = fc.constantFrom(
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/xml",
  "application/jsonx",
  "json",
  "",
);

/** Idempotency-Keys outside the accepted alphabet or length (header values a Request can carry). */
function oddKey(kind: "run" | "job"): fc.Arbitrary<string> {
  const ascii = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 40 });
  const long = fc.integer({ min: kind === "run" ? 201 : 129, max: 2_000 }).map((n) => "k".repeat(n));
  const bad = kind === "run" ? /^[\x21-\x7e]{1,200}$/ : /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
  const odd = kind === "run" ? ["a b", "é", "key\t1"] : ["a b", "é", "key\t1", "-starts-with-dash", "x/y", "_x"];
  return fc.oneof(long, ascii.filter((k) => !bad.test(k.trim()) && k.trim().length > 0), fc.constantFrom(...odd));
}

// ---- the checks ---------------------------------------------------------------------------------

function expectStructured4xx(res: Answer, context: string): void {
  const detail = `${context} → ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, detail).toBeGreaterThanOrEqual(400);
  expect(res.status, detail).toBeLessThan(500);
  expect(res.headers.get("Content-Type") ?? "", detail).toContain("application/json");
  expect(typeof res.body.error?.code, detail).toBe("string");
  expect(typeof res.body.error?.message, detail).toBe("string");
  expect(ERROR_STATUS[res.body.error.code as keyof typeof ERROR_STATUS], detail).toBe(res.status);
}

function request(e: { method: string; path: () => string }, token: string | null, text: string | ReadableStream<Uint8Array> | undefined, headers: Record<string, string> = {}): Promise<Answer> {
  const h: Record<string, string> = { ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  return send(new Request(`http://docket.test${e.path()}`, { method: e.method, headers: h, body: text }));
}

describe("malformed bodies on every JSON endpoint", () => {
  for (const e of endpoints) {
    it(`${e.method} ${e.route}: 400 invalid_request naming the field, never a 5xx, nothing changed`, async () => {
      const before = await state();
      await fc.assert(
        fc.asyncProperty(brokenBodies(e), async (broken) => {
          const res = await request(e, e.token(), broken.text, { "Content-Type": "application/json" });
          expectStructured4xx(res, broken.what);
          expect(res.status, `${broken.what} → ${res.text.slice(0, 300)}`).toBe(400);
          expect(res.body.error.code).toBe("invalid_request");
          // The 400 names the broken field (or a part of it: an element of a list, a key of a record).
          const named = String(res.body.error.field);
          if (broken.field !== null) expect(named === broken.field || named.startsWith(`${broken.field}.`), `${broken.what} → ${res.text.slice(0, 300)}`).toBe(true);
        }),
        { numRuns: RUNS * 2, seed: SEED },
      );
      expect(await state()).toEqual(before);
    });
  }
});

/** Bodies past every size: over the byte limit, deep, wide, or with one huge string. */
function oversizedBodies(e: JsonEndpoint, maxBytes: number): { what: string; text: () => string | ReadableStream<Uint8Array>; expect: number[] }[] {
  const valid = e.valid();
  const firstField = e.fields.find((x) => x.type === "string" || x.type === "stringArray")?.path ?? ["x"];
  const chunked = (bytes: number) => () => {
    const chunk = new TextEncoder().encode("[".repeat(64 * 1024));
    let sent = 0;
    return new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent >= bytes) return c.close();
        sent += chunk.length;
        c.enqueue(chunk);
      },
    });
  };
  return [
    { what: "10,000 levels of arrays as the body", text: () => "[".repeat(10_000) + "]".repeat(10_000), expect: [400] },
    { what: "10,000 levels of objects as the body", text: () => "{\"a\":".repeat(10_000) + "1" + "}".repeat(10_000), expect: [400] },
    { what: "a body of nested arrays just over the byte limit", text: () => "[".repeat(maxBytes / 2 + 1) + "]".repeat(maxBytes / 2 + 1), expect: [413] },
    { what: "a string over the byte limit in the first field", text: () => JSON.stringify(setAt(valid, firstField, "x".repeat(maxBytes))), expect: [413] },
    { what: "20,000 unknown keys", text: () => JSON.stringify({ ...valid, ...Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])) }), expect: [400] },
    // Over the byte limit of most endpoints, under that of reports.
    { what: "200,000 keys", text: () => JSON.stringify(Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`key${i}`, i]))), expect: [400, 413] },
    { what: "a chunked body of 30 MB without Content-Length", text: chunked(30 * 1024 * 1024), expect: [413] },
  ];
}

describe("oversized and deeply nested bodies on every JSON endpoint", () => {
  for (const e of endpoints) {
    it(`${e.method} ${e.route}: 413 past the byte limit, 400 for deep or wide JSON, never a 5xx, nothing changed`, async () => {
      const before = await state();
      const maxBytes = e.route === "/v1/runs/:id/reports" ? DEFAULTS.reportBodyMaxBytes : DEFAULTS.requestBodyMaxBytes;
      for (const body of oversizedBodies(e, maxBytes)) {
        const res = await request(e, e.token(), body.text(), { "Content-Type": "application/json" });
        expectStructured4xx(res, `${e.method} ${e.route} with ${body.what}`);
        expect(body.expect, `${body.what} → ${res.status} ${res.text.slice(0, 200)}`).toContain(res.status);
        if (res.status === 413) expect(res.body.error).toMatchObject({ code: "payload_too_large", max_bytes: maxBytes });
      }
      expect(await state()).toEqual(before);
    });
  }
});

describe("odd headers", () => {
  for (const e of endpoints) {
    it(`${e.method} ${e.route}: a body under another Content-Type than JSON is refused, never read as {}, nothing changed`, async () => {
      const before = await state();
      await fc.assert(
        fc.asyncProperty(
          oddContentType,
          fc.oneof(fc.constantFrom("reason=stop&x=1", "<xml/>", "--x\r\n\r\n--x--", JSON.stringify(e.valid())), fc.string({ minLength: 1, maxLength: 50 }).filter((t) => t.trim() !== "")),
          async (contentType, text) => {
            const res = await request(e, e.token(), text, contentType === "" ? {} : { "Content-Type": contentType });
            expectStructured4xx(res, `Content-Type ${JSON.stringify(contentType)} with ${JSON.stringify(text)}`);
            expect(res.body.error.field).toBe("Content-Type");
          },
        ),
        { numRuns: RUNS, seed: SEED },
      );
      expect(await state()).toEqual(before);
    });
  }

  for (const e of endpoints.filter((x) => x.idempotencyKey)) {
    it(`${e.method} ${e.route}: an Idempotency-Key outside its alphabet or length is 400 naming the header, nothing changed`, async () => {
      const before = await state();
      await fc.assert(
        fc.asyncProperty(oddKey(e.idempotencyKey!), async (key) => {
          const res = await request(e, e.token(), JSON.stringify(e.valid()), { "Content-Type": "application/json", "Idempotency-Key": key });
          expectStructured4xx(res, `Idempotency-Key ${JSON.stringify(key)}`);
          expect(res.body.error.field).toBe("Idempotency-Key");
        }),
        { numRuns: RUNS, seed: SEED },
      );
      expect(await state()).toEqual(before);
    });
  }

  it("an Authorization header that carries no issued token is 401 on every kind of endpoint", async () => {
    const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 120 });
    const header = fc.oneof(
      printable,
      printable.map((t) => `Bearer ${t}`),
      fc.constantFrom("dkt_m_", "dkt_s_", "dkt_a_", "dkt_r_").chain((p) => fc.stringMatching(/^[0-9a-f]{0,70}$/).map((h) => `Bearer ${p}${h}`)),
      fc.integer({ min: 1_000, max: 60_000 }).map((n) => `Bearer ${"a".repeat(n)}`),
    );
    const targets = [
      { method: "GET", path: () => "/v1/runs" },
      { method: "POST", path: () => "/v1/runners/claim" },
      { method: "POST", path: () => `/v1/runs/${S.run}/reports` },
      { method: "POST", path: () => "/v1/runners/register" },
      { method: "POST", path: () => "/v1/orgs" },
    ];
    const before = await state();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), header, async (target, auth) => {
        fc.pre(auth.trim() !== ADMIN_SECRET && auth.trim() !== `Bearer ${ADMIN_SECRET}`);
        const res = await request(target, null, target.method === "GET" ? undefined : "{}", { Authorization: auth, "Content-Type": "application/json" });
        expectStructured4xx(res, `${target.method} ${target.path()} with Authorization ${JSON.stringify(auth.slice(0, 80))}`);
        expect(res.status).toBe(401);
      }),
      { numRuns: RUNS * 3, seed: SEED },
    );
    expect(await state()).toEqual(before);
  });

  it("GET /v1/runs/:id/events/stream: a Last-Event-ID that is not a sequence number is 400 naming the header", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom("-1", "1.5", "abc", "1e3", "0x10", "9".repeat(16)), fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 20 }).filter((s) => !/^\d{1,15}$/.test(s))),
        async (id) => {
          const res = await request({ method: "GET", path: () => `/v1/runs/${S.run}/events/stream` }, S.admin, undefined, { "Last-Event-ID": id });
          expectStructured4xx(res, `Last-Event-ID ${JSON.stringify(id)}`);
          expect(res.body.error.field).toBe("Last-Event-ID");
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  });
});

// ---- path and query parameters ------------------------------------------------------------------

/** The credential that gets a route past authentication, so that its parameters are what is judged. */
function tokenFor(route: string): string | null {
  if (route === "/v1/orgs") return ADMIN_SECRET;
  if (route === "/v1/runners/register") return S.registration;
  if (route === "/v1/runners/:id") return S.admin;
  if (route === "/v1/runs/:id/reports") return S.attemptToken;
  if (route.startsWith("/v1/runners/") || route.includes("/attempts/")) return S.machine.token;
  if (route.startsWith("/v1/build-callbacks/")) return null;
  return S.admin;
}

const paramValue = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: "grapheme", maxLength: 10 }),
  fc.constantFrom("..", ".", "%00", "%2F", "run_", "run_zzzzzzzzzzzzzzzzzzzzzzzz", "prj_0", "-1", "0", "1e3", "99999999999999999999", " ", "%", "null", "undefined"),
);

describe("odd path parameters", () => {
  // The app lists a route once per handler and middleware: each route once.
  const routes = [...new Map(app.routes.filter((r) => r.path.startsWith("/v1/") && r.path.includes(":") && r.method !== "ALL").map((r) => [`${r.method} ${r.path}`, r])).values()];
  for (const r of routes) {
    it(`${r.method} ${r.path}: every generated parameter is a structured 4xx, nothing changed`, async () => {
      const before = await state();
      const names = r.path.match(/:[a-z]+/g)!;
      const endpoint = endpoints.find((e) => e.route === r.path && e.method === r.method);
      await fc.assert(
        fc.asyncProperty(fc.array(paramValue, { minLength: names.length, maxLength: names.length }), async (values) => {
          let path = r.path;
          names.forEach((name, i) => {
            const raw = values[i];
            // Raw "%" sequences stay as they are: a broken percent-encoding is part of the input.
            path = path.replace(name, raw.startsWith("%") ? raw : encodeURIComponent(raw));
          });
          const text = endpoint ? JSON.stringify(endpoint.valid()) : r.method === "GET" ? undefined : "{}";
          const res = await request({ method: r.method, path: () => path }, tokenFor(r.path), text, text ? { "Content-Type": "application/json" } : {});
          expectStructured4xx(res, `${r.method} ${path}`);
        }),
        { numRuns: RUNS, seed: SEED },
      );
      expect(await state()).toEqual(before);
    });
  }

  it("paths and methods nobody serves are a structured 404 (405 with Allow on a known path)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"), fc.webPath(), async (method, path) => {
        const served = app.routes.some((r) => r.method === method && new RegExp(`^${r.path.replace(/:[a-z]+/g, "[^/]+")}$`).test(`/v1${path}`));
        fc.pre(!served);
        const res = await request({ method, path: () => `/v1${path.startsWith("/") ? path : `/${path}`}` }, S.admin, undefined);
        expectStructured4xx(res, `${method} /v1${path}`);
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });
});

describe("odd query parameters", () => {
  it("GET /v1/runs/:id/events/stream: an after that is not a sequence number, or an unknown key, is 400", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("after", "before", "limit", "Last-Event-ID"), fc.string({ maxLength: 20 }).filter((v) => !/^\d{1,15}$/.test(v)), async (key, value) => {
        const path = `/v1/runs/${S.run}/events/stream?${encodeURIComponent(key)}=${encodeURIComponent(value)}`;
        const res = await request({ method: "GET", path: () => path }, S.admin, undefined);
        expectStructured4xx(res, path);
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  const lists: { path: string; keys: string[] }[] = [
    { path: "/v1/runs", keys: ["state", "limit", "cursor"] },
    { path: "/v1/tokens", keys: ["kind", "limit", "cursor"] },
    { path: `/v1/runs/{run}/events`, keys: ["cursor", "limit"] },
    { path: "/v1/credits", keys: ["limit", "cursor", "job_id"] },
    { path: "/v1/runners", keys: ["limit", "cursor"] },
    { path: "/v1/projects", keys: ["limit", "cursor"] },
    { path: "/v1/autopilot/projects", keys: ["limit", "cursor"] },
    { path: "/v1/build-requests", keys: ["project_id", "label", "limit", "cursor"] },
    { path: "/v1/build-jobs", keys: ["status", "request_id", "limit", "cursor"] },
  ];
  const badValue = fc.oneof(fc.constantFrom("-1", "0", "abc", "1.5", "1e400", "", "[]", "%zz", "99999999999999999999999"), fc.string({ maxLength: 20 }));
  for (const list of lists) {
    it(`GET ${list.path}: an unknown key or a bad value is a structured 4xx; anything else answers without a 5xx`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(fc.oneof(fc.constantFrom(...list.keys), fc.string({ maxLength: 8 })), badValue), { minLength: 1, maxLength: 4 }),
          async (pairs) => {
            const query = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v.startsWith("%") ? v : encodeURIComponent(v)}`).join("&");
            const path = `${list.path.replace("{run}", S.run)}?${query}`;
            const res = await request({ method: "GET", path: () => path }, S.admin, undefined);
            expect(res.status, `${path} → ${res.status} ${res.text.slice(0, 200)}`).toBeLessThan(500);
            if (res.status >= 400) expectStructured4xx(res, path);
          },
        ),
        { numRuns: RUNS, seed: SEED },
      );
    });
  }
});
