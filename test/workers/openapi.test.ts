// The OpenAPI document (/v1/openapi.json) against the app's own routes: every route and method is
// in it, each operation says who may call and what it answers, and every error code it lists is
// one docs/protocol.md documents. (Every suite also runs with CONTRACT_CHECK=enforce, so an answer
// a route gives that its operation does not describe fails the test that met it.)

import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { ERROR_STATUS } from "../../src/protocol/errors";
import { callDirect as call, send } from "./direct";

type Json = Record<string, any>;

/** The app's routes as the document names them: /v1/runs/:id → /v1/runs/{id}. */
function appOperations(): { path: string; method: string }[] {
  const seen = new Set<string>();
  const ops: { path: string; method: string }[] = [];
  for (const route of app.routes) {
    if (route.method === "ALL") continue;
    const path = route.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    const key = `${route.method} ${path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    ops.push({ path, method: route.method.toLowerCase() });
  }
  return ops;
}

/** Routes that are not part of the API the document describes: the index, health, the document and its page. */
const NOT_API = new Set(["get /", "get /healthz", "get /docs", "get /docs/assets/{file}", "get /v1/openapi.json"]);

async function document(): Promise<Json> {
  const res = await call("GET", "/v1/openapi.json");
  expect(res.status).toBe(200);
  return res.body;
}

describe("the OpenAPI document", () => {
  it("is OpenAPI 3.1 with the credentials as security schemes", async () => {
    const doc = await document();
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.title).toBe("Docket API");
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(["adminSecret", "attemptToken", "machineToken", "memberToken", "registrationToken"]);
  });

  it("describes every route and method of the app", async () => {
    const doc = await document();
    const missing = appOperations()
      .filter((op) => !NOT_API.has(`${op.method} ${op.path}`))
      // The dashboard's pages are HTML over these operations, not operations of their own.
      .filter((op) => !op.path.startsWith("/dash"))
      .filter((op) => !doc.paths[op.path]?.[op.method])
      .map((op) => `${op.method.toUpperCase()} ${op.path}`);
    expect(missing).toEqual([]);
  });

  it("gives each operation a unique id, a summary, a security requirement, its path parameters and a success answer", async () => {
    const doc = await document();
    const ids = new Set<string>();
    for (const [path, item] of Object.entries<Json>(doc.paths)) {
      for (const [method, op] of Object.entries<Json>(item)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect(op.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
        expect(ids.has(op.operationId), `${where}: operationId ${op.operationId} twice`).toBe(false);
        ids.add(op.operationId);
        expect(op.summary, where).toBeTruthy();
        expect(Array.isArray(op.security), where).toBe(true);
        const statuses = Object.keys(op.responses);
        expect(statuses.some((s) => s.startsWith("2")), `${where} has no success answer`).toBe(true);
        for (const name of path.match(/\{(\w+)\}/g) ?? []) {
          const param = (op.parameters ?? []).find((p: Json) => p.in === "path" && `{${p.name}}` === name);
          expect(param, `${where}: path parameter ${name} is not described`).toBeTruthy();
        }
      }
    }
  });

  it("lists, for every refusal status, error codes of that status only", async () => {
    const doc = await document();
    for (const [path, item] of Object.entries<Json>(doc.paths)) {
      for (const [method, op] of Object.entries<Json>(item)) {
        for (const [status, answer] of Object.entries<Json>(op.responses)) {
          if (Number(status) < 400) continue;
          const codes: string[] = answer.content["application/json"].schema.properties.error.properties.code.enum;
          for (const code of codes) expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], `${method} ${path} ${status} ${code}`).toBe(Number(status));
        }
        // Every call can be refused for bad input, and every authenticated one for a bad credential.
        expect(Object.keys(op.responses), `${method} ${path}`).toContain("400");
        if (op.security.length > 0) expect(Object.keys(op.responses), `${method} ${path}`).toContain("401");
      }
    }
  });

  it("marks a request body optional exactly where an empty body (which counts as {}) is accepted", async () => {
    const paths = (await document()).paths;
    expect(paths["/v1/runs/{id}/cancel"].post.requestBody.required).toBe(false);
    expect(paths["/v1/runs/{id}/attempts/{n}/lease"].post.requestBody.required).toBe(false);
    expect(paths["/v1/build-requests/{id}/dispatch"].post.requestBody.required).toBe(false);
    expect(paths["/v1/runs"].post.requestBody.required).toBe(true);
    expect(paths["/v1/runs/{id}/attempts/{n}/launched"].post.requestBody.required).toBe(true);
  });

  it("is linked from the index and rendered at /docs by a renderer this deployment serves itself", async () => {
    const index = await call("GET", "/");
    expect(index.body.openapi).toBe("/v1/openapi.json");
    const page = await send(new Request("http://docket.test/docs"));
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/text\/html/);
    expect(page.text).toContain("/v1/openapi.json");
    for (const asset of page.text.match(/\/docs\/assets\/[\w.-]+/g) ?? []) {
      const res = await send(new Request(`http://docket.test${asset}`));
      expect(res.status, asset).toBe(200);
      expect(res.text.length, asset).toBeGreaterThan(1_000);
    }
    const other = await send(new Request("http://docket.test/docs/assets/package.json"));
    expect(other.status).toBe(404);
  });
});
