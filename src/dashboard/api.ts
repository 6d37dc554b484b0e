// The dashboard reads and acts through the API itself: each call is a request to the Worker's own
// app made as the member token the session acts as (src/auth.ts, actingAsMember), so it meets the
// same authorization, validation and organization boundary as any client (docs/protocol.md),
// without the token itself: the session's cookie holds only a session id.

import type { Context } from "hono";
import type { AppEnv } from "../app-types";
import type { Env } from "../env";
import { actingAsMember } from "../auth";

/** The app the dashboard calls: the Worker's HTTP app (src/app.ts), passed in so nothing imports it back. */
export interface Api {
  fetch(request: Request, env: Env, ctx?: ExecutionContext): Response | Promise<Response>;
}

type Json = Record<string, any>;

export interface ApiAnswer {
  status: number;
  ok: boolean;
  body: Json;
}

function executionContext(c: Context<AppEnv>): ExecutionContext | undefined {
  try {
    return c.executionCtx as ExecutionContext;
  } catch {
    return undefined;
  }
}

/** The raw answer of one API call made as the session's member (the live event stream passes it on as is). */
export async function apiResponse(c: Context<AppEnv>, api: Api, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
  }
  return api.fetch(new Request(new URL(path, c.req.url), init), actingAsMember(c.env, c.get("caller")), executionContext(c));
}

/** One API call made as the session's member, its JSON answer parsed. */
export async function apiCall(c: Context<AppEnv>, api: Api, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
  const res = await apiResponse(c, api, method, path, body);
  const text = await res.text();
  return { status: res.status, ok: res.ok, body: text ? (JSON.parse(text) as Json) : {} };
}
