/** @jsxImportSource hono/jsx */
// An autopilot project's configuration as GET /v1/autopilot/projects/:id states it: where its
// tracker delivers webhooks, the GitHub App it acts as, what its runs launch and where they push;
// secrets only as whether one is stored (the API never shows them).

import { trackerName } from "./autopilot-pages";
import { at } from "./layout";

type Json = Record<string, any>;

const stored = (set: boolean) => (set ? "stored (never shown)" : <span class="bad">not stored</span>);

export function ConfigSection(props: { project: Json }) {
  const { project } = props;
  const { run, webhook, github, tracker } = project;
  const linear = tracker?.kind === "linear";
  return (
    <section id="configuration" aria-labelledby="configuration-title">
      <h2 id="configuration-title">Configuration</h2>
      <dl class="facts">
        <dt>Tracker</dt><dd>{trackerName(project)}</dd>
        <dt>Webhook address</dt>
        <dd>
          <code>{webhook.url}</code>
          <br />
          <span class="muted">
            {linear
              ? "the Linear webhook's URL (the team's Issues, Comments and Issue relations), signed with the secret below"
              : "the GitHub App's webhook URL (events: Issues, Issue comment, Issue dependencies), signed with the secret below"}
          </span>
        </dd>
        <dt>Webhook secret</dt><dd>{stored(webhook.secret_set)}</dd>
        {linear && <><dt>Linear API key</dt><dd>{stored(tracker.api_key_set)}</dd></>}
        <dt>GitHub App</dt>
        <dd>app {github.app_id}, installation {github.installation_id} at <code>{github.api_url}</code>; private key {stored(github.private_key_set)}</dd>
        <dt>Runs launch</dt>
        <dd>{run.launch.protocol} · <code>{run.launch.command.join(" ")}</code>{run.launch.image ? <> · image <code>{run.launch.image}</code></> : null}</dd>
        <dt>Runner labels</dt><dd>{run.labels.length ? run.labels.join(", ") : <span class="muted">none: any runner of the protocol</span>}</dd>
        <dt>Runs clone and push</dt><dd>{run.repository_url ? <code>{run.repository_url}</code> : <span class="muted">the issue's repository page</span>}</dd>
        <dt>Changed</dt><dd>{at(project.updated_at_ms)}</dd>
      </dl>
      <p class="muted">An admin changes these with PATCH /v1/autopilot/projects/{project.id} (the API reference is at /docs).</p>
    </section>
  );
}
