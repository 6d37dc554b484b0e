// A 500 says why in its log line (src/app.ts, `http.internal_error`): drizzle wraps D1's own refusal
// in "Failed query: …" (the statement and its parameters), so the line's `cause` carries D1's words.
// The case is the one `npm run demo` met: code with a column whose D1 migration was not applied,
// so creating an autopilot project answered 500 and nothing said why. The answer stays `internal`.
//
// What is real: the Worker, its routes and D1. What stands in: D1's answer to that one insert, the
// refusal a database without the column gives.

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../../src/index";
import { appKeyPair } from "./app-key";
import { createOrg } from "./helpers";

const REFUSAL = "D1_ERROR: table autopilot_projects has no column named last_error: SQLITE_ERROR";

/** The test's D1, but an insert into autopilot_projects is refused as by a database without the column. */
function dbWithoutColumn(): D1Database {
  const db = env.DB;
  const refuse = () => Promise.reject(new Error(REFUSAL));
  const refused = { bind: () => refused, run: refuse, all: refuse, raw: refuse, first: refuse };
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => (sql.startsWith('insert into "autopilot_projects"') ? refused : target.prepare(sql));
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

afterEach(() => vi.restoreAllMocks());

describe("an internal error's log line", () => {
  it("names D1's refusal under drizzle's failed query as its cause, and the answer stays a plain 500 internal", async () => {
    const { admin } = await createOrg("internal-error-cause");
    const log = vi.spyOn(console, "log");
    const body = {
      name: "widgets",
      repository: "acme/widgets",
      run: { launch: { command: ["node", "agent.mjs"] } },
      webhook_secret: "a webhook secret of enough length",
      github: { app_id: "1001", installation_id: "2002", private_key: (await appKeyPair()).pkcs1Pem },
    };
    const request = new Request("http://docket.test/v1/autopilot/projects", {
      method: "POST",
      headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const ctx = createExecutionContext();
    const res = await worker.fetch(request, { ...env, DB: dbWithoutColumn() }, ctx);
    await waitOnExecutionContext(ctx);

    expect(res.status).toBe(500);
    const answer = await res.text();
    expect(JSON.parse(answer)).toEqual({ error: { code: "internal", message: "internal error" } });
    expect(answer).not.toContain("last_error");
    const lines = log.mock.calls.map((args) => String(args[0])).filter((text) => text.includes('"http.internal_error"')).map((text) => JSON.parse(text));
    expect(lines).toEqual([expect.objectContaining({ method: "POST", path: "/v1/autopilot/projects", cause: `Error: ${REFUSAL}` })]);
    expect(lines[0].reason).toContain("Failed query");
  });
});
