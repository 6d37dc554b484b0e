/** @jsxImportSource hono/jsx */
// Creating an autopilot project from the console (an admin's): the form (autopilot-new-page.tsx)
// and its answer, one call to POST /v1/autopilot/projects with the body the API takes
// (docs/protocol.md, "Autopilot projects"). The API checks every field and names the one it refuses.

import type { Context, Hono } from "hono";
import type { AppEnv } from "../app-types";
import { apiCall, type Api } from "./api";
import { NewAutopilotProjectPage, type ProjectForm } from "./autopilot-new-page";
import { isAdmin, page, Refused, type Json } from "./route-kit";
import { DASH } from "./session";

/** The typed text of each field, trimmed; the private key as pasted. */
function formOf(body: Record<string, unknown>): ProjectForm {
  const form: ProjectForm = {};
  for (const [key, value] of Object.entries(body)) if (typeof value === "string") form[key] = key === "private_key" ? value : value.trim();
  return form;
}

const listOf = (text: string | undefined, separator: RegExp) => (text ?? "").split(separator).map((s) => s.trim()).filter(Boolean);
const given = (text: string | undefined) => (text ? text : undefined);

/** The form as POST /v1/autopilot/projects's body: empty optional fields left out, so the API's defaults apply. */
export function projectBody(form: ProjectForm): Json {
  const linear = form.tracker === "linear";
  const readyLabel = given(form.ready_label);
  return {
    name: form.name,
    repository: form.repository,
    ...(linear
      ? { tracker: { kind: "linear", workspace: form.linear_workspace, team: form.linear_team, api_key: form.api_key, ready_label: readyLabel ?? "ready", review_state: given(form.linear_review_state) ?? "In Review" } }
      : { ready_label: readyLabel }),
    run: { launch: { command: listOf(form.command, /\s+/) }, labels: listOf(form.labels, /,/) },
    webhook_secret: form.webhook_secret,
    github: { api_url: given(form.api_url), app_id: form.app_id, installation_id: form.installation_id, private_key: form.private_key },
  };
}

/** Which field of the form an API refusal's field is (`github.app_id` is the form's `app_id`). */
export function formField(apiField: string | undefined): string | null {
  if (!apiField) return null;
  const [head, next] = apiField.split(".");
  if (head === "github" && next) return next;
  if (head === "tracker" && next) return { workspace: "linear_workspace", team: "linear_team", review_state: "linear_review_state", api_key: "api_key", ready_label: "ready_label" }[next] ?? "tracker";
  if (head === "run") return next === "labels" ? "labels" : "command";
  return head;
}

async function create(c: Context<AppEnv>, api: Api): Promise<Response> {
  const form = formOf(await c.req.parseBody());
  const answer = await apiCall(c, api, "POST", "/v1/autopilot/projects", projectBody(form));
  if (answer.ok) return c.redirect(`${DASH}/autopilot/${answer.body.id}?done=project+created`, 303);
  const error = answer.body.error ?? {};
  // A refusal of the input is said beside the form; any other (not an admin, say) is the error page.
  if (answer.status !== 400 && answer.status !== 409) throw new Refused(answer.status, error);
  const refused = { field: formField(error.field), message: String(error.message ?? answer.status) };
  c.header("Cache-Control", "no-store");
  return c.html(<NewAutopilotProjectPage form={form} refused={refused} admin={isAdmin(c)} />, answer.status as 400);
}

/** The new project form and its answer; registered before the project's own page, whose path it would match. */
export function newProjectRoutes(dash: Hono<AppEnv>, api: Api): void {
  dash.get("/autopilot/new", page(async (c) => {
    if (!isAdmin(c)) throw new Refused(403, { code: "forbidden", message: "Creating an autopilot project needs an admin token." });
    return c.html(<NewAutopilotProjectPage form={{ tracker: "github" }} admin />);
  }));
  dash.post("/autopilot", page((c) => create(c, api)));
}
