// Reads through D1 sessions (docs/protocol.md, "Read your own writes"): the member API's D1 reads
// may be answered by a read replica, and the x-d1-bookmark a call returns, sent on the next,
// makes that call see what the first one wrote.

import { describe, expect, it } from "vitest";
import { call, createOrg, registerRunner, runBody } from "./helpers";

const BOOKMARK = "x-d1-bookmark";

describe("x-d1-bookmark", () => {
  it("a dispatch returns a bookmark; a list read with it sees the run and returns a bookmark no older", async () => {
    const { admin } = await createOrg();
    const created = await call("POST", "/v1/runs", { token: admin, body: runBody() });
    expect(created.status).toBe(201);
    const written = created.headers.get(BOOKMARK);
    expect(written).toMatch(/^[0-9a-f]+(-[0-9a-f]+)*$/i);
    const listed = await call("GET", "/v1/runs", { token: admin, headers: { [BOOKMARK]: written! } });
    expect(listed.status).toBe(200);
    expect(listed.body.runs.map((r: { id: string }) => r.id)).toContain(created.body.id);
    const read = listed.headers.get(BOOKMARK);
    expect(read).not.toBeNull();
    // Bookmarks sort oldest to newest: the read's session is at least where the write left it.
    expect(read! >= written!).toBe(true);
  });

  it("the run, runner list and credit reads take a bookmark and return one", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const created = await call("POST", "/v1/runs", { token: admin, body: runBody() });
    const bookmark = created.headers.get(BOOKMARK)!;
    const run = await call("GET", `/v1/runs/${created.body.id}`, { token: admin, headers: { [BOOKMARK]: bookmark } });
    expect(run.status).toBe(200);
    expect(run.headers.get(BOOKMARK)).not.toBeNull();
    const runners = await call("GET", "/v1/runners", { token: admin, headers: { [BOOKMARK]: bookmark } });
    expect(runners.status).toBe(200);
    expect(runners.body.runners.map((r: { id: string }) => r.id)).toContain(runner.machineId);
    expect(runners.headers.get(BOOKMARK)! >= bookmark).toBe(true);
    const credits = await call("GET", "/v1/credits", { token: admin });
    expect(credits.status).toBe(200);
    expect(credits.headers.get(BOOKMARK)).toMatch(/^[0-9a-f]+(-[0-9a-f]+)*$/i);
  });

  it("a malformed bookmark is 400 invalid_request naming the header, and nothing is read", async () => {
    const { admin } = await createOrg();
    const res = await call("GET", "/v1/runs", { token: admin, headers: { [BOOKMARK]: "not a bookmark; drop table runs" } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: BOOKMARK });
    expect(res.body.runs).toBeUndefined();
  });
});
