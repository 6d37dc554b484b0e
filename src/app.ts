// The Worker's HTTP app: one router per resource, errors mapped to JSON in one place.

import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { AppEnv } from "./app-types";
import { boundedBody } from "./bounds";
import { loadConfig } from "./config";
import { DocketError, errorResponse } from "./errors";
import { countFailedAuth } from "./rate-limit";
import { rootCause } from "./lib/error-causes";
import { log } from "./lib/log";
import { DOCS_PAGE, openApiDocument } from "./openapi/document";
import { autopilotProjectRoutes } from "./routes/autopilot-projects";
import { autopilotSchedulerRoutes } from "./routes/autopilot-scheduler";
import { autopilotAdmissionRoutes } from "./routes/autopilot-admission";
import { autopilotLinearRoutes } from "./routes/autopilot-linear";
import { autopilotReservationRoutes } from "./routes/autopilot-reservations";
import { autopilotRunRoutes } from "./routes/autopilot-runs";
import { buildJobRoutes } from "./routes/build-jobs";
import { creditRoutes } from "./routes/credits";
import { eventRoutes } from "./routes/events";
import { deliveryRoutes } from "./routes/deliveries";
import { orgRoutes } from "./routes/orgs";
import { projectRoutes } from "./routes/projects";
import { runRoutes } from "./routes/runs";
import { runnerRoutes } from "./routes/runners";
import { attemptRoutes } from "./routes/attempts";
import { tokenRoutes } from "./routes/tokens";
import { managedPoolRoutes } from "./routes/managed-pools";
import { dashboardRoutes } from "./dashboard/routes";

/** The files of the /docs page's renderer the Worker serves from its assets. */
const DOCS_ASSETS = new Set(["swagger-ui-bundle.js", "swagger-ui.css"]);

export const app = new Hono<AppEnv>()
  .use("*", async (c, next) => {
    c.set("config", loadConfig(c.env));
    await next();
  })
  .use("*", boundedBody)
  // A path that is a route of its own (/v1/runners/claim) asked with a method it does not answer is
  // 405 before any pattern it also fits (GET /v1/runners/:id) may take it.
  .use("/v1/*", async (c, next) => {
    const own = literalMethods(c.req.path);
    const answered = own?.has(c.req.method) || c.req.method === "OPTIONS" || (c.req.method === "HEAD" && own?.has("GET"));
    if (own && !answered) return methodNotAllowed(c.req.method, c.req.path, [...own].sort());
    await next();
  })
  .get("/", (c) => c.json({ service: "docket", api: "/v1", openapi: "/v1/openapi.json", reference: "/docs", docs: "docs/protocol.md" }))
  .get("/healthz", (c) => c.json({ ok: true }))
  .get("/docs", (c) => c.html(DOCS_PAGE))
  .get("/docs/assets/:file", async (c) => {
    const file = c.req.param("file");
    if (!DOCS_ASSETS.has(file) || !c.env.ASSETS) return errorResponse(new DocketError("not_found", `no file ${file}`));
    return c.env.ASSETS.fetch(new URL(`/${file}`, c.req.url));
  })
  .route("/v1", orgRoutes)
  .route("/v1", tokenRoutes)
  .route("/v1", runnerRoutes)
  .route("/v1", attemptRoutes)
  .route("/v1", runRoutes)
  .route("/v1", eventRoutes)
  .route("/v1", deliveryRoutes)
  .route("/v1", creditRoutes)
  .route("/v1", projectRoutes)
  .route("/v1", buildJobRoutes)
  .route("/v1", autopilotProjectRoutes)
  .route("/v1", autopilotAdmissionRoutes)
  .route("/v1", autopilotLinearRoutes)
  .route("/v1", autopilotSchedulerRoutes)
  .route("/v1", autopilotReservationRoutes)
  .route("/v1", autopilotRunRoutes)
  .route("/v1", managedPoolRoutes);

// The operator's dashboard calls this app for everything it reads and does (src/dashboard/api.ts).
app.route("/dash", dashboardRoutes(app));

// Registered last, so the document describes every route above.
app.get("/v1/openapi.json", openApiDocument(app));

/** Each registered route's path as a pattern and the methods it answers (middleware, "ALL", is left out). */
let routeTable: { path: string; pattern: RegExp; literal: boolean; methods: Set<string> }[] | null = null;

function routesOf(): { path: string; pattern: RegExp; literal: boolean; methods: Set<string> }[] {
  if (routeTable) return routeTable;
  const byPath = new Map<string, Set<string>>();
  for (const route of app.routes) {
    if (route.method === "ALL") continue;
    const methods = byPath.get(route.path) ?? new Set<string>();
    methods.add(route.method);
    byPath.set(route.path, methods);
  }
  routeTable = [...byPath].map(([path, methods]) => {
    const segments = path.split("/").map((s) => (s.startsWith(":") ? "[^/]+" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
    return { path, pattern: new RegExp(`^${segments.join("/")}$`), literal: !path.includes(":"), methods };
  });
  return routeTable;
}

let literalRoutes: Map<string, Set<string>> | null = null;

/** The methods of the route whose path is exactly `path` (no parameter), or null when none is. */
function literalMethods(path: string): Set<string> | null {
  literalRoutes ??= new Map(routesOf().filter((route) => route.literal).map((route) => [route.path, route.methods]));
  return literalRoutes.get(path) ?? null;
}

function methodNotAllowed(method: string, path: string, allow: string[]): Response {
  const response = errorResponse(new DocketError("method_not_allowed", `${method} is not allowed on ${path}; allowed: ${allow.join(", ")}`, { allow }));
  response.headers.set("Allow", allow.join(", "));
  return response;
}

/**
 * The methods a known path answers, in a stable order; empty for a path no route has. A path that
 * is a route of its own (/v1/runners/claim) answers its own methods, not those of a pattern it also
 * fits (/v1/runners/:id).
 */
export function allowedMethods(path: string): string[] {
  const matching = routesOf().filter((route) => route.pattern.test(path));
  const own = matching.some((route) => route.literal) ? matching.filter((route) => route.literal) : matching;
  return [...new Set(own.flatMap((route) => [...route.methods]))].sort();
}

// A known path asked with a method it does not answer is 405 with Allow; an unknown path is 404.
app.notFound((c) => {
  const allow = allowedMethods(c.req.path);
  if (allow.length === 0) return errorResponse(new DocketError("not_found", `no route for ${c.req.method} ${c.req.path}`));
  return methodNotAllowed(c.req.method, c.req.path, allow);
});

app.onError(async (err, c) => {
  if (err instanceof DocketError && err.code === "unauthorized") return errorResponse(await countFailedAuth(c.env, loadConfig(c.env), c.req.header("CF-Connecting-IP"), err));
  if (err instanceof DocketError) return errorResponse(err);
  if (err instanceof HTTPException && err.status < 500) {
    // Hono's own refusals, such as a body that is not JSON.
    return errorResponse(new DocketError("invalid_request", err.message || "malformed request", { field: "body" }));
  }
  // `cause`: what the error wraps, such as D1's refusal under drizzle's "Failed query" (the statement alone).
  log("http.internal_error", { method: c.req.method, path: c.req.path, reason: String(err), cause: rootCause(err), stack: (err as Error).stack });
  return errorResponse(new DocketError("internal", "internal error"));
});
