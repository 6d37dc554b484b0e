/** @jsxImportSource hono/jsx */
// The form an admin creates an autopilot project with (POST /dash/autopilot, which calls POST
// /v1/autopilot/projects): its tracker (GitHub Issues, or a Linear team), the GitHub repository its
// pull requests go to, what makes an issue ready, what its runs launch, the webhook secret and the
// GitHub App. A refusal is said beside the form, which keeps what was typed but the secrets.

import { Layout } from "./layout";
import { DASH } from "./session";

/** The form's fields as typed (secrets never filled back in). */
export type ProjectForm = Record<string, string>;

/** The fields whose values the page never sends back: typed again after a refusal. */
export const SECRET_FIELDS = ["webhook_secret", "private_key", "api_key"];

const PROBLEM_ID = "new-project-problem";

function Field(props: { name: string; label: string; form: ProjectForm; hint?: string; required?: boolean; type?: string; problem?: string | null }) {
  const invalid = props.problem === props.name ? { "aria-invalid": "true", "aria-describedby": PROBLEM_ID } : {};
  return (
    <label>
      {props.label}{" "}
      <input type={props.type ?? "text"} name={props.name} value={SECRET_FIELDS.includes(props.name) ? "" : props.form[props.name] ?? ""} placeholder={props.hint} required={props.required} autocomplete="off" {...invalid} />
    </label>
  );
}

/** `refused`: the API's refusal of the last try, its field named when it has one. */
export function NewAutopilotProjectPage(props: { form: ProjectForm; refused?: { field: string | null; message: string } | null; admin: boolean }) {
  const { form } = props;
  const problem = props.refused?.field ?? null;
  const tracker = form.tracker === "linear" ? "linear" : "github";
  return (
    <Layout title="New autopilot project" signedIn admin={props.admin} section="autopilot" subpage>
      <p><a href={`${DASH}/autopilot`}>All projects</a></p>
      <h1>New autopilot project</h1>
      <p class="muted">
        Issues of the tracker made ready by a person become runs; their pull requests go to the GitHub repository through the GitHub App. The project's
        page then shows the webhook address to give the tracker. Secrets are stored encrypted and never shown again.
      </p>
      {props.refused && (
        <p id={PROBLEM_ID} class="error" role="alert">
          The project was not created: {props.refused.message}
          {SECRET_FIELDS.some((f) => form[f]) ? " (type the secrets again: they are not sent back)" : ""}
        </p>
      )}
      <form method="post" action={`${DASH}/autopilot`} id="new-project">
        <h2>Project</h2>
        <Field name="name" label="Name" form={form} required problem={problem} />{" "}
        <Field name="repository" label="GitHub repository" form={form} hint="owner/name" required problem={problem} />
        <h2>Tracker</h2>
        <label>
          Issues from{" "}
          <select name="tracker">
            <option value="github" selected={tracker === "github"}>GitHub Issues of the repository</option>
            <option value="linear" selected={tracker === "linear"}>a Linear team</option>
          </select>
        </label>{" "}
        <Field name="ready_label" label="Ready label" form={form} hint="ready" problem={problem} />
        <fieldset>
          <legend>Linear (when the issues come from a Linear team)</legend>
          <Field name="linear_workspace" label="Workspace URL key" form={form} hint="acme" problem={problem} />{" "}
          <Field name="linear_team" label="Team key" form={form} hint="ENG" problem={problem} />{" "}
          <Field name="linear_review_state" label="Review state (where a published issue moves)" form={form} hint="In Review" problem={problem} />{" "}
          <Field name="api_key" label="Linear API key" type="password" form={form} problem={problem} />
        </fieldset>
        <h2>Runs</h2>
        <Field name="command" label="Command" form={form} hint="node agent.mjs" required problem={problem} />{" "}
        <Field name="labels" label="Runner labels" form={form} hint="linux, gpu" problem={problem} />
        <p class="muted">The command is split at spaces; an argument with a space in it needs the API.</p>
        <h2>Webhook and GitHub App</h2>
        <Field name="webhook_secret" label="Webhook secret" type="password" form={form} required problem={problem} />{" "}
        <Field name="app_id" label="App id" form={form} required problem={problem} />{" "}
        <Field name="installation_id" label="Installation id" form={form} required problem={problem} />{" "}
        <Field name="api_url" label="GitHub API" form={form} hint="https://api.github.com" problem={problem} />
        <label>
          App private key (PEM)
          <br />
          <textarea name="private_key" rows={6} cols={64} required autocomplete="off" {...(problem === "private_key" ? { "aria-invalid": "true", "aria-describedby": PROBLEM_ID } : {})} />
        </label>
        <p><button type="submit">Create project</button></p>
      </form>
    </Layout>
  );
}
