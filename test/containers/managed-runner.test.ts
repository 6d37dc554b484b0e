// A managed runner in a real container on the local Docker engine: the runner CLI's image
// (containers/runner), started by its Durable Object (durable-objects/managed-runner.ts), registers
// with an ordinary registration token, claims and completes a run, and calls nothing but the public
// routes of the OpenAPI document; a killed container's machine goes silent and its lease lapses as
// any runner's does.

import { runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ManagedRunner } from "../../durable-objects/managed-runner";
import { call, createOrg } from "../workers/helpers";
import { AGENT, containersEngine, managedRunner as slot, waitFor } from "./helpers";

const engineOk = containersEngine("managed runner tests");

/** What the Worker logged of the container's calls to Docket (durable-objects/managed-runner.ts). */
const containerCalls: { method: string; path: string; status: number }[] = [];

async function registrationToken(admin: string): Promise<string> {
  const res = await call("POST", "/v1/tokens", { token: admin, body: { kind: "registration" } });
  expect(res.status).toBe(201);
  return res.body.token as string;
}

const readRun = async (admin: string, id: string) => (await call("GET", `/v1/runs/${id}`, { token: admin })).body;

/** The OpenAPI document's operations as method + path pattern. */
async function publicOperations(): Promise<{ method: string; pattern: RegExp }[]> {
  const doc = (await call("GET", "/v1/openapi.json")).body as { paths: Record<string, Record<string, unknown>> };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((method) => ({ method: method.toUpperCase(), pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, "[^/]+")}$`) })),
  );
}

describe.skipIf(!engineOk)("a managed runner in a container", () => {
  const slots: string[] = [];
  beforeAll(() => {
    const original = console.log;
    vi.spyOn(console, "log").mockImplementation((line: unknown, ...rest: unknown[]) => {
      if (typeof line === "string" && line.startsWith('{"msg":"managed_runner.call"')) containerCalls.push(JSON.parse(line));
      else original(line, ...rest);
    });
  });
  afterAll(async () => {
    for (const name of slots) await slot(name).halt();
    vi.restoreAllMocks();
  });

  it("registers with an ordinary registration token, claims and completes a run, calling only public routes", async () => {
    const { orgId, admin } = await createOrg("managed-acme");
    slots.push(`${orgId}:pool:0`);
    await slot(`${orgId}:pool:0`).launch({ registrationToken: await registrationToken(admin), name: "managed-0", labels: ["managed"] });

    const dispatched = await call("POST", "/v1/runs", {
      token: admin,
      body: { brief: 'scope:\n- notes.txt\nacceptance:\n- ends with "done"', labels: ["managed"], launch: { command: ["node", AGENT] } },
    });
    expect(dispatched.status).toBe(201);
    const run = await waitFor("the run", () => readRun(admin, dispatched.body.id), (r) => ["completed", "failed", "cancelled"].includes(r.state));
    expect(run.state).toBe("completed");

    // The machine is an ordinary one in the organization's registry.
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners as { name: string; labels: string[] }[];
    expect(runners).toEqual([expect.objectContaining({ name: "managed-0", labels: ["managed"] })]);

    const operations = await publicOperations();
    const called = [...new Set(containerCalls.map((c) => `${c.method} ${c.path}`))];
    const outsideTheDocument = called.filter((route) => {
      const [method, path] = route.split(" ");
      return !operations.some((op) => op.method === method && op.pattern.test(path));
    });
    expect(outsideTheDocument).toEqual([]);
    expect(called).toEqual(expect.arrayContaining(["POST /v1/runners/register", "POST /v1/runners/claim", `POST /v1/runs/${run.id}/reports`]));

    // halt stops the container; its state says so and still names the runner it launched.
    await slot(`${orgId}:pool:0`).halt();
    const halted = await waitFor("the halt", () => slot(`${orgId}:pool:0`).runnerState(), (s) => !s.running, 30_000);
    expect(halted).toEqual({ running: false, startedAt: expect.any(Number), name: "managed-0" });
  });

  it("a killed container's machine goes silent and its launched run fails as any runner's does once its lease lapsed", async () => {
    const { orgId, admin } = await createOrg("managed-doomed");
    const name = `${orgId}:pool:0`;
    slots.push(name);
    await slot(name).launch({ registrationToken: await registrationToken(admin), name: "doomed-0", labels: ["doomed"] });
    const dispatched = await call("POST", "/v1/runs", {
      token: admin,
      body: { brief: "wait", labels: ["doomed"], launch: { command: ["node", "-e", "setTimeout(() => {}, 600000)"] } },
    });
    await waitFor("the run's launch", () => readRun(admin, dispatched.body.id), (r) => r.state === "implementing");

    await runInDurableObject(slot(name), (instance: ManagedRunner) => instance.destroy());
    const killedAtMs = Date.now();
    expect((await slot(name).runnerState()).running).toBe(false);

    // The reaper's rule for any runner: lease lapsed (LEASE_TTL_MS) and daemon silent (DAEMON_SILENCE_MS).
    const ended = await waitFor("the reaper", () => readRun(admin, dispatched.body.id), (r) => r.state !== "implementing", 60_000);
    expect(ended.state).toBe("failed");
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners as { name: string; last_seen_at_ms: number }[];
    expect(runners).toEqual([expect.objectContaining({ name: "doomed-0" })]);
    expect(runners[0].last_seen_at_ms).toBeLessThanOrEqual(killedAtMs);
  });
});
