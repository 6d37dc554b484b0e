/** @jsxImportSource hono/jsx */
// What every dashboard route shares: the API reads and actions as the signed-in member, path
// parameters checked against the API's own schemas, and API refusals shown as error pages.

import type { Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { machineId, runId, tokenId } from "../protocol/common";
import { apiCall, type Api } from "./api";
import { ErrorPage } from "./common-pages";

export type Json = Record<string, any>;

/** An API refusal met while building a page: the page answers with its status and error. */
export class Refused extends Error {
  constructor(readonly status: number, readonly error: Json) {
    super(String(error?.message ?? status));
  }
}

/** A page of something that does not exist (or that this member may not see): 404, in words. */
export function noSuch(what: string, value: string): Refused {
  return new Refused(404, { code: "not_found", message: `No such ${what}: ${value}.` });
}

/**
 * A path parameter the API's own schema accepts; anything else is a page that does not exist. Ids
 * go into API paths, so only an id's own characters are let through.
 */
export function pathParam(c: Context<AppEnv>, name: string, schema: z.ZodType<string>, what = "id"): string {
  const value = c.req.param(name) ?? "";
  if (!schema.safeParse(value).success) throw noSuch(what, value);
  return value;
}

export const runParam = (c: Context<AppEnv>) => pathParam(c, "id", runId, "run");
export const machineParam = (c: Context<AppEnv>) => pathParam(c, "id", machineId, "runner");
export const tokenParam = (c: Context<AppEnv>) => pathParam(c, "id", tokenId, "token");
/** An issue number as a path segment (the API bounds its value). */
export const issueNumber = z.string().regex(/^[1-9][0-9]{0,9}$/);

/** Whether the signed-in member has the admin role: admin-only actions are offered to admins only (the API still checks). */
export function isAdmin(c: Context<AppEnv>): boolean {
  return c.get("caller")?.role === "admin";
}

/** A form's number field for the API: a number when it is one, otherwise as typed, so the API's validation names what is wrong with it. */
export function formNumber(value: unknown): unknown {
  const typed = typeof value === "string" ? value.trim() : value;
  return typeof typed === "string" && /^\d{1,15}$/.test(typed) ? Number(typed) : typed;
}

/** A resolution form's body for the API: its cost and note. */
export async function resolution(c: Context<AppEnv>): Promise<{ cost_cents: unknown; note: unknown }> {
  const form = await c.req.parseBody();
  return { cost_cents: formNumber(form.cost_cents), note: typeof form.note === "string" ? form.note : undefined };
}

export async function read(c: Context<AppEnv>, api: Api, path: string): Promise<Json> {
  const answer = await apiCall(c, api, "GET", path);
  if (!answer.ok) throw new Refused(answer.status, answer.body.error ?? {});
  return answer.body;
}

/** What an action that came back here (`?done=`) did, for the page's status line. */
export function doneNotice(c: Context<AppEnv>): string | undefined {
  const done = c.req.query("done");
  return done ? `Done: ${done}.` : undefined;
}

/** A page handler whose API refusals become error pages. */
export function page(handler: (c: Context<AppEnv>) => Promise<Response>) {
  return async (c: Context<AppEnv>) => {
    try {
      return await handler(c);
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      return c.html(<ErrorPage status={err.status} error={err.error} admin={isAdmin(c)} />, err.status as 400);
    }
  };
}

/** An action: one API call, then back to `next` on success, or the refusal as an error page. */
export async function act(c: Context<AppEnv>, api: Api, method: string, path: string, body: unknown, next: string): Promise<Response> {
  const answer = await apiCall(c, api, method, path, body);
  if (!answer.ok) throw new Refused(answer.status, answer.body.error ?? {});
  return c.redirect(next, 303);
}

export type Form = Record<string, unknown>;

/** A form's optional number field: left out when empty. */
export const optionalNumber = (value: unknown) => (value === undefined || value === "" ? undefined : formNumber(value));

/** A destroying action's form must come with its confirmation box ticked (ConfirmBox in components.tsx). */
export function requireConfirmation(form: Form, what: string): void {
  if (form.confirm !== "yes") throw new Refused(400, { code: "invalid_request", field: "confirm", message: `Tick the confirmation box: ${what}.` });
}
