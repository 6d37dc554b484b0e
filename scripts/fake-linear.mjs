#!/usr/bin/env node
// The Linear stand-in as a process of its own: the tests' fake Linear (test/fake-linear/server.mjs,
// Linear's GraphQL API as Docket uses it, over real HTTP on loopback, with webhooks signed as Linear
// signs them) served until this process is stopped, for `DEMO_TRACKER=linear npm run demo` and for
// trying a Linear project by hand. Its workspace is changed through stdin, one JSON command a line,
// each answered by one JSON line on stdout.

import { createInterface } from "node:readline";
import { startFakeLinear } from "../test/fake-linear/server.mjs";
import { helpOrRefuse } from "./cli-args.mjs";

helpOrRefuse("node scripts/fake-linear.mjs", () => `node scripts/fake-linear.mjs: a local Linear stand-in (the tests' fake) on 127.0.0.1, until stopped
(Ctrl-C, or stdin closed). It prints {"url": "http://127.0.0.1:<port>/graphql", "api_key": "…"} once it
listens; give them as a Linear project's tracker.api_url and tracker.api_key. Its workspace's URL key
is FAKE_LINEAR_WORKSPACE (default acme): the project's tracker.workspace.

Commands on stdin, one JSON object a line; each answers one line, {"ok": true, …} or {"ok": false, "error"}:
  {"op": "team", "key": "ENG", "name": "Engineering"}   a team (with Linear's default workflow states)
  {"op": "label", "name": "ready"}                      a workspace label
  {"op": "subscribe", "url": "…", "secret": "…", "team": "ENG"}
                                                        a webhook of the team, signed with the secret
  {"op": "open_issue", "team": "ENG", "title": "…", "description": "…", "label": "ready", "by": "Alice Human"}
                                                        an issue that person creates, then labels
  {"op": "issue", "identifier": "ENG-1"}                its workflow state, labels and attachments`);

const linear = await startFakeLinear({ urlKey: process.env.FAKE_LINEAR_WORKSPACE || "acme" });
const { state } = linear;
const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);
say({ url: linear.url, api_key: linear.apiKey });

const text = (value, what) => {
  if (typeof value !== "string" || value === "") throw new Error(`${what} must be a non-empty string`);
  return value;
};

/** The statuses Docket answered a change's webhook deliveries with. */
const answered = (deliveries) => deliveries.map((d) => d.answer?.status ?? null);

/** What each command does to the stand-in's workspace. */
const COMMANDS = {
  team({ key, name }) {
    state.addTeam(text(key, "key"), name ?? key);
    return { team: key };
  },
  label({ name }) {
    state.addLabel(text(name, "name"));
    return { label: name };
  },
  subscribe({ url, secret, team }) {
    state.subscribe({ url: text(url, "url"), secret: text(secret, "secret"), team: text(team, "team") });
    return { team };
  },
  async open_issue({ team, title, description = "", label, by = "Alice Human" }) {
    const person = state.person(text(by, "by"));
    const created = await state.createIssue({ team: text(team, "team"), title: text(title, "title"), description, by: person });
    const labelled = await state.label(created.value, text(label, "label"), person);
    const issue = state.issue(created.value);
    return { identifier: state.identifier(issue), number: issue.number, deliveries: [...answered(created.deliveries), ...answered(labelled.deliveries)] };
  },
  issue({ identifier }) {
    const issue = state.issue(text(identifier, "identifier"));
    return { identifier, state: state.stateOf(issue).name, labels: state.labelsOf(issue), attachments: state.attachmentsOf(issue).map((a) => a.url) };
  },
};

// One command at a time, in order: a change's answer waits for its webhooks' deliveries.
let queue = Promise.resolve();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  queue = queue.then(async () => {
    try {
      const command = JSON.parse(line);
      const run = COMMANDS[command?.op];
      if (!run) throw new Error(`unknown op ${JSON.stringify(command?.op)}; the ops are ${Object.keys(COMMANDS).join(", ")}`);
      say({ ok: true, ...(await run(command)) });
    } catch (e) {
      say({ ok: false, error: e instanceof Error ? e.message : String(e) });
    }
  });
});

const stop = () => linear.close().then(() => process.exit(0));
lines.on("close", () => queue.then(stop));
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, stop);
