/** @jsxImportSource hono/jsx */
// The operator's dashboard at /dash: server-rendered pages over the API's own answers. Every read
// and every action is a call to the API as the member token the session acts as
// (src/dashboard/api.ts), so the pages see exactly what that member's token may see. Each area's
// routes are a file of their own (runs-routes, run-routes, runners-routes, tokens-routes, autopilot-routes,
// credits-routes, managed-routes); what they share is route-kit.

import { Hono, type Context } from "hono";
import { csrf } from "hono/csrf";
import { HTTPException } from "hono/http-exception";
import { secureHeaders } from "hono/secure-headers";
import type { AppEnv } from "../app-types";
import { DocketError } from "../errors";
import type { Api } from "./api";
import { DASH_SCRIPTS } from "./assets";
import { newProjectRoutes } from "./autopilot-new-routes";
import { autopilotRoutes } from "./autopilot-routes";
import { ErrorPage, SignInPage } from "./common-pages";
import { creditsRoutes } from "./credits-routes";
import { managedRoutes } from "./managed-routes";
import { noSuch, page } from "./route-kit";
import { runRoutes } from "./run-routes";
import { runnersRoutes } from "./runners-routes";
import { runsRoutes } from "./runs-routes";
import { tokensRoutes } from "./tokens-routes";
import { DASH, endSession, requireSession, SESSION_ENDED, startSession, verifyMember } from "./session";

/** Forms are accepted only from this origin (hono/csrf checks Origin and Sec-Fetch-Site); a cross-site post is 403. */
const sameOriginForms = (() => {
  const check = csrf();
  return async (c: Context<AppEnv>, next: () => Promise<void>) => {
    try {
      await check(c, next);
    } catch (err) {
      if (!(err instanceof HTTPException) || err.status !== 403) throw err;
      return c.html(<ErrorPage status={403} error={new DocketError("forbidden", "this form was not sent from the dashboard's own pages").toBody()} />, 403);
    }
  };
})();

const DASH_HEADERS = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'self'"],
    // The layout's empty inline icon (data:,), so no page asks for /favicon.ico.
    imgSrc: ["'self'", "data:"],
    styleSrc: ["'unsafe-inline'"],
    // Scripts are files of this origin (src/dashboard/assets.ts): an injected inline script does not run.
    scriptSrc: ["'self'"],
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
  referrerPolicy: "same-origin",
});

/** Why the session ended, as `?ended=` says it, in words for the sign-in page. */
function endedMessage(ended: string | undefined): string | undefined {
  if (!ended) return undefined;
  return Object.hasOwn(SESSION_ENDED, ended) ? SESSION_ENDED[ended as keyof typeof SESSION_ENDED] : SESSION_ENDED.unknown;
}

function signInRoutes(dash: Hono<AppEnv>): void {
  dash.get("/sign-in", (c) => c.html(<SignInPage message={endedMessage(c.req.query("ended"))} />));
  dash.post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const token = typeof form.token === "string" ? form.token.trim() : "";
    let member;
    try {
      member = await verifyMember(c, token);
    } catch (err) {
      if (!(err instanceof DocketError) || (err.code !== "unauthorized" && err.code !== "rate_limited")) throw err;
      return c.html(<SignInPage error={`That token does not sign in: ${err.message}`} />, err.status as 401);
    }
    await startSession(c, member);
    return c.redirect(DASH, 303);
  });
  dash.post("/sign-out", async (c) => {
    await endSession(c);
    return c.redirect(`${DASH}/sign-in`, 303);
  });
  // The pages' scripts, before the session check: they hold nothing of any member's.
  dash.get("/assets/:file", page(async (c) => {
    const file = c.req.param("file") ?? "";
    if (!Object.hasOwn(DASH_SCRIPTS, file)) throw noSuch("file", file);
    return c.body(DASH_SCRIPTS[file], 200, { "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "no-cache" });
  }));
}

/** The dashboard, calling `api` (the Worker's app) for everything it shows and does. */
export function dashboardRoutes(api: Api): Hono<AppEnv> {
  const dash = new Hono<AppEnv>();
  dash.use("*", DASH_HEADERS);
  dash.use("*", sameOriginForms);
  signInRoutes(dash);
  dash.use("*", requireSession);
  runsRoutes(dash, api);
  runRoutes(dash, api);
  runnersRoutes(dash, api);
  tokensRoutes(dash, api);
  newProjectRoutes(dash, api);
  autopilotRoutes(dash, api);
  creditsRoutes(dash, api);
  managedRoutes(dash, api);
  // Last: any other path under /dash is the dashboard's own 404 page, not the API's JSON.
  dash.all("*", page(async (c) => {
    throw noSuch("page", c.req.path);
  }));
  return dash;
}
