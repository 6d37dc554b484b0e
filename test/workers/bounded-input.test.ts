// Bounded input (docs/protocol.md, "Limits"): a body over its byte limit is 413 payload_too_large
// before it is parsed, whether or not it says its length; a value over a configured bound is 400
// invalid_request naming the field; neither creates or changes anything.

import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULTS, loadConfig } from "../../src/config";
import { send } from "./direct";
import { attemptCall, call, claim, CLI_VERSION, createOrg, dispatch, getRun, registerRunner, report, runBody } from "./helpers";

let admin: string;

beforeAll(async () => {
  admin = (await createOrg("bounds")).admin;
});

const listRuns = async () => (await call("GET", "/v1/runs?limit=200", { token: admin })).body.runs;

/** A body that never says its length: chunks of `chunkBytes` until `totalBytes`, counting what was read. */
function chunkedBody(totalBytes: number, chunkBytes = 64 * 1024) {
  const chunk = new TextEncoder().encode("x".repeat(chunkBytes));
  const sent = { bytes: 0 };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent.bytes >= totalBytes) return controller.close();
      sent.bytes += chunk.length;
      controller.enqueue(chunk);
    },
  });
  return { stream, sent };
}

describe("request body limits", () => {
  it("a 20 MB dispatch with 2,000 env keys is 413 payload_too_large and creates no run", async () => {
    const before = await listRuns();
    const envVars = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`K${i}`, "v".repeat(10_000)]));
    const res = await call("POST", "/v1/runs", { token: admin, body: runBody({ launch: { command: ["x"], env: envVars } }) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("payload_too_large");
    expect(res.body.error.max_bytes).toBe(DEFAULTS.requestBodyMaxBytes);
    expect(await listRuns()).toEqual(before);
  });

  it("a dispatch under the byte limit with 2,000 env keys is 400 naming launch.env, and creates no run", async () => {
    const before = await listRuns();
    const envVars = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`K${i}`, "v"]));
    const res = await call("POST", "/v1/runs", { token: admin, body: runBody({ launch: { command: ["x"], env: envVars } }) });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "launch.env" });
    expect(await listRuns()).toEqual(before);
  });

  it("a chunked body without Content-Length is cut off at the limit: 413, and the rest is never read", async () => {
    const before = await listRuns();
    const { stream, sent } = chunkedBody(120 * 1024 * 1024);
    const res = await send(
      new Request("http://docket.test/v1/runs", {
        method: "POST",
        headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
        body: stream,
      }),
    );
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("payload_too_large");
    // Reading stopped near the limit, nowhere near the 120 MB offered.
    expect(sent.bytes).toBeLessThan(DEFAULTS.requestBodyMaxBytes + 4 * 64 * 1024);
    expect(await listRuns()).toEqual(before);
  });

  it("a chunked body under the limit is read whole and validated as usual", async () => {
    const text = new TextEncoder().encode(JSON.stringify(runBody({ brief: "chunked" })));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(text.slice(0, 10));
        controller.enqueue(text.slice(10));
        controller.close();
      },
    });
    const res = await send(
      new Request("http://docket.test/v1/runs", { method: "POST", headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" }, body: stream }),
    );
    expect(res.status).toBe(201);
    expect(res.body.brief).toBe("chunked");
  });

  it("the limit applies before authentication looks at the body: other JSON endpoints answer 413 too", async () => {
    const big = JSON.stringify({ name: "x".repeat(DEFAULTS.requestBodyMaxBytes) });
    const res = await call("POST", "/v1/tokens", { token: admin, rawBody: big });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("payload_too_large");
  });
});

describe("configured bounds on dispatch", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["a brief longer than BRIEF_MAX_CHARS", { brief: "b".repeat(DEFAULTS.briefMaxChars + 1) }, "brief"],
    ["more labels than LABELS_MAX", { labels: Array.from({ length: DEFAULTS.labelsMax + 1 }, (_, i) => `l${i}`) }, "labels"],
    ["more metadata keys than METADATA_MAX_KEYS", { metadata: Object.fromEntries(Array.from({ length: DEFAULTS.metadataMaxKeys + 1 }, (_, i) => [`m${i}`, "v"])) }, "metadata"],
    ["more env keys than LAUNCH_ENV_MAX_KEYS", { launch: { command: ["x"], env: Object.fromEntries(Array.from({ length: DEFAULTS.launchEnvMaxKeys + 1 }, (_, i) => [`E${i}`, "v"])) } }, "launch.env"],
    ["more env characters than LAUNCH_ENV_MAX_CHARS", { launch: { command: ["x"], env: { A: "a".repeat(9_000), B: "b".repeat(9_000), C: "c".repeat(9_000), D: "d".repeat(9_000), E: "e".repeat(9_000), F: "f".repeat(9_000), G: "g".repeat(9_000), H: "h".repeat(9_000) } } }, "launch.env"],
  ];
  for (const [what, overrides, field] of cases) {
    it(`${what} is 400 invalid_request naming ${field}, and creates no run`, async () => {
      const before = await listRuns();
      const res = await call("POST", "/v1/runs", { token: admin, body: runBody(overrides) });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field });
      expect(await listRuns()).toEqual(before);
    });
  }

  it("a value exactly at each bound is accepted", async () => {
    const res = await call("POST", "/v1/runs", {
      token: admin,
      body: runBody({
        brief: "b".repeat(DEFAULTS.briefMaxChars),
        labels: Array.from({ length: DEFAULTS.labelsMax }, (_, i) => `l${i}`),
        metadata: Object.fromEntries(Array.from({ length: DEFAULTS.metadataMaxKeys }, (_, i) => [`m${i}`, "v"])),
        launch: { command: ["x"], env: Object.fromEntries(Array.from({ length: DEFAULTS.launchEnvMaxKeys }, (_, i) => [`E${i}`, "v"])) },
      }),
    });
    expect(res.status).toBe(201);
  });

  it("a runner registering more labels than LABELS_MAX is 400 naming labels", async () => {
    const registration = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } })).body.token;
    const labels = Array.from({ length: DEFAULTS.labelsMax + 1 }, (_, i) => `l${i}`);
    const res = await call("POST", "/v1/runners/register", { token: registration, body: { name: "many", labels, protocols: ["process"], cli_version: CLI_VERSION } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "labels" });
  });
});

describe("bounds on daemon reports", () => {
  async function launchedRun() {
    // An organization of its own, so that the claim gets this run and no other.
    const { admin } = await createOrg("reports");
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const granted = (await claim(runner.token, 0)).body;
    expect(granted.run_id).toBe(runId);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "s" });
    return { admin, runId, attemptToken: granted.attempt_token as string };
  }

  it("a report over REPORT_BODY_MAX_BYTES is 413 and the run does not change", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const before = await getRun(admin, runId);
    const patch = "+" + "x".repeat(DEFAULTS.reportBodyMaxBytes);
    const res = await report(attemptToken, runId, { final: { outcome: "completed", artifact: { patch } } });
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: "payload_too_large", max_bytes: DEFAULTS.reportBodyMaxBytes });
    const after = await getRun(admin, runId);
    expect(after.state).toBe(before.state);
    expect(after.version).toBe(before.version);
  });

  it("a patch longer than ARTIFACT_PATCH_MAX_CHARS (under the byte limit) is 400 naming final.artifact.patch", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const before = await getRun(admin, runId);
    const patch = "x".repeat(DEFAULTS.artifactPatchMaxChars + 1);
    const res = await report(attemptToken, runId, { final: { outcome: "completed", artifact: { patch } } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "final.artifact.patch" });
    expect((await getRun(admin, runId)).version).toBe(before.version);
  });

  it("more lines than REPORT_LINES_MAX in one report is 400 naming lines, and no output is recorded", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const lines = Array.from({ length: DEFAULTS.reportLinesMax + 1 }, (_, i) => `line ${i}`);
    const res = await report(attemptToken, runId, { phase: "implementing", lines });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "lines" });
    const events = (await call("GET", `/v1/runs/${runId}/events`, { token: admin })).body.events;
    expect(events.some((e: { type: string }) => e.type === "run.output")).toBe(false);
  });
});

describe("bound configuration", () => {
  it("a bound above its hard ceiling is a deployment error", () => {
    expect(() => loadConfig({ BRIEF_MAX_CHARS: "100001" })).toThrow(/BRIEF_MAX_CHARS must be at most 100000/);
    expect(() => loadConfig({ REQUEST_BODY_MAX_BYTES: "5000000" })).toThrow(/REQUEST_BODY_MAX_BYTES/);
    expect(loadConfig({ LABELS_MAX: "4" }).labelsMax).toBe(4);
  });

  it("the test pool runs with the default bounds", () => {
    expect(env.REQUEST_BODY_MAX_BYTES ?? String(DEFAULTS.requestBodyMaxBytes)).toBe(String(DEFAULTS.requestBodyMaxBytes));
  });
});
