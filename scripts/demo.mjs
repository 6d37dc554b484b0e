#!/usr/bin/env node
// `npm run demo`: autopilot end to end on this machine, from an issue a person labels ready to the
// pull request of its run. It starts Docket as `npm start` does (scripts/start.mjs), the GitHub
// stand-in (scripts/fake-github.mjs), a bare git remote and the runner CLI with a sample agent
// (scripts/demo-agent.mjs); creates an autopilot project through the API; opens a labelled issue
// and delivers its signed webhook; and says where to watch, until Ctrl-C stops everything. With
// DEMO_TRACKER=linear the issue is a Linear issue instead, in the Linear stand-in
// (scripts/fake-linear.mjs), which sends its own signed webhooks; the pull request is GitHub's.

import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { makeAppKeyPair } from "../test/fake-github/server.mjs";
import { deliverWebhook, eventually } from "../test/e2e/autopilot-helpers.mjs";
import { bareRepo, removeTempDirs } from "../test/e2e/helpers.mjs";
import { helpOrRefuse } from "./cli-args.mjs";

helpOrRefuse("npm run demo", () => `npm run demo: autopilot end to end on this machine. It starts Docket (as npm start does), a
local GitHub stand-in, a bare git remote and a runner with a sample agent; creates an autopilot
project; opens an issue a person labelled ready and delivers its signed webhook; prints where to
watch it in the console, and when its pull request is opened. Ctrl-C stops everything and removes
the demo's files (all in one temporary directory; kept when it fails, for their logs).

Environment:
  DEMO_TRACKER          github   where the issue is: github (GitHub Issues), or linear (a Linear
                                 team's issue, in a local Linear stand-in; the pull request is GitHub's)
  PORT                  8787     the port of the demo's Docket on 127.0.0.1
  DEMO_TIMEOUT_MS       300000   the longest wait for each step (Docket answering, the pull request)
  START_TIMEOUT_MS and the other settings of npm start (npm start -- --help) apply to its Docket.`);

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const REPOSITORY = "acme/widgets";
const ISSUE = 1;
const TEAM = "ENG";
const TRACKERS = ["github", "linear"];
const tracker = process.env.DEMO_TRACKER || "github";
if (!TRACKERS.includes(tracker)) {
  console.error(`DEMO_TRACKER must be one of ${TRACKERS.join(", ")}, got ${JSON.stringify(process.env.DEMO_TRACKER)}`);
  process.exit(2);
}
/** The issue as people name it: #1 on GitHub, ENG-1 in Linear. */
const ISSUE_NAME = tracker === "linear" ? `${TEAM}-${ISSUE}` : `#${ISSUE}`;
const port = process.env.PORT || "8787";
const base = `http://127.0.0.1:${port}`;
const timeoutMs = Number(process.env.DEMO_TIMEOUT_MS || 300_000);
if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
  console.error(`DEMO_TIMEOUT_MS must be a whole number of milliseconds above 0, got ${JSON.stringify(process.env.DEMO_TIMEOUT_MS)}`);
  process.exit(2);
}
const work = mkdtempSync(join(tmpdir(), "docket-demo-"));
/** @type {Map<string, import("node:child_process").ChildProcess>} every process the demo started, by name */
const children = new Map();
let stopping = false;

const step = (text) => console.log(`demo: ${text}`);

/** A child process with its output in `<work>/<name>.log`; its unexpected exit stops the demo. */
function start(name, args, env = {}, stdio = "ignore") {
  const log = openSync(join(work, `${name}.log`), "a");
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: [stdio, stdio === "pipe" ? "pipe" : log, log] });
  children.set(name, child);
  child.on("exit", (code, signal) => {
    children.delete(name);
    if (!stopping) stop(1, `${name} exited (${code ?? signal}); its log: ${join(work, `${name}.log`)}\n${tail(join(work, `${name}.log`))}`);
  });
  return child;
}

const tail = (path) => readFileSync(path, "utf8").split("\n").slice(-25).join("\n");

/** Stops every child (Docket last, so the runner's last calls are answered) and removes the demo's files, unless it failed. */
async function stop(code, why) {
  if (stopping) return;
  stopping = true;
  if (why) console.error(`demo: ${why}`);
  step("stopping…");
  for (const name of ["runner", "linear", "github", "docket"]) {
    const child = children.get(name);
    if (!child) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill(name === "docket" ? "SIGINT" : "SIGTERM");
    // Bounded: a child that does not stop in 20 s is killed.
    if ((await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)])) === false) child.kill("SIGKILL");
  }
  removeTempDirs();
  // After a failure the logs say why: they stay.
  if (code === 0) rmSync(work, { recursive: true, force: true });
  else console.error(`demo: its logs are kept in ${work}`);
  process.exit(code);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => stop(0));

/** A bare repository with one commit at <work>/remotes/acme/widgets: issues' html_url point there. */
function makeRemote() {
  const seed = bareRepo();
  const bare = join(work, "remotes", REPOSITORY);
  mkdirSync(dirname(bare), { recursive: true });
  const cloned = spawnSync("git", ["clone", "--quiet", "--bare", seed.url, bare], { encoding: "utf8" });
  if (cloned.status !== 0) throw new Error(`git clone --bare: ${cloned.stderr}`);
  return bare;
}

/** The GitHub stand-in: its first line (its URL), and `send(command)` answering its JSON line (scripts/fake-github.mjs). */
function startGitHub(publicKeyFile) {
  return startStandIn("github", "fake-github.mjs", { FAKE_GITHUB_PUBLIC_KEY_FILE: publicKeyFile, FAKE_GITHUB_REPOSITORIES: join(work, "remotes") });
}

/** A stand-in process of scripts/: the JSON line it prints once it listens, and `send(command)` answering its JSON line. */
async function startStandIn(name, script, env) {
  const child = start(name, [join(ROOT, "scripts", script)], env, "pipe");
  const answers = [];
  const waiting = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    const answer = JSON.parse(line);
    const next = waiting.shift();
    if (next) next(answer);
    else answers.push(answer);
  });
  const nextAnswer = () => (answers.length ? Promise.resolve(answers.shift()) : new Promise((resolve) => waiting.push(resolve)));
  const listening = await nextAnswer();
  const send = async (command) => {
    child.stdin.write(`${JSON.stringify(command)}\n`);
    const answer = await nextAnswer();
    if (!answer.ok) throw new Error(`the ${name} stand-in refused ${command.op}: ${answer.error}`);
    return answer;
  };
  return { ...listening, send };
}

/** One call to the demo's Docket: `{status, body}`. */
async function api(method, path, { token, body } = {}) {
  const res = await fetch(base + path, {
    method,
    signal: AbortSignal.timeout(30_000),
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** `api`, refusing any answer but `expected`; a 500 says why, as Docket's log tells it. */
async function must(expected, method, path, options) {
  const res = await api(method, path, options);
  if (res.status === expected) return res.body;
  const why = res.status >= 500 ? `\n  Docket's log says: ${await internalError(method, path)}` : "";
  throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(res.body)}${why}`);
}

/**
 * Why Docket answered `method path` with a 500, from its last `http.internal_error` line in
 * docket.log: the error's cause (D1's refusal of a statement, say: a database without a migration
 * of the code it runs), else its reason. The line may reach the log a moment after the answer.
 */
async function internalError(method, path) {
  for (let i = 0; i < 10; i++) {
    const lines = readFileSync(join(work, "docket.log"), "utf8").split("\n").filter((l) => l.includes('"http.internal_error"'));
    const entry = lines.reverse().map(logEntry).find((e) => e?.method === method && e.path === path.split("?")[0]);
    if (entry) return entry.cause ?? entry.reason;
    await sleep(200);
  }
  return `no line about it (${join(work, "docket.log")})`;
}

/** One structured log line, or null when it is not one whole JSON line. */
function logEntry(line) {
  try {
    return JSON.parse(line.slice(line.indexOf("{")));
  } catch {
    return null;
  }
}

/** Docket as `npm start` runs it, on a state of its own; resolves once it answers. */
async function startDocket(adminSecret) {
  start("docket", [join(ROOT, "scripts", "start.mjs")], {
    PORT: port, PERSIST_TO: join(work, "state"), ADMIN_SECRET: adminSecret, OUTBOUND_ALLOW_LOOPBACK: "true",
  });
  await eventually(`Docket to answer at ${base}/healthz`, () => fetch(`${base}/healthz`).then((r) => r.ok, () => false), timeoutMs, 500);
}

/** A registered runner listening, whose home is <work>/runner-home; its output is in runner.log. */
function startRunner(registrationToken) {
  const cli = join(ROOT, "runner-cli", "bin", "docket-runner.mjs");
  const env = { ...process.env, DOCKET_RUNNER_HOME: join(work, "runner-home") };
  const registered = spawnSync(process.execPath, [cli, "register", "--server", base, "--token", registrationToken, "--name", "demo-runner"], { env, encoding: "utf8", timeout: 60_000 });
  if (registered.status !== 0) throw new Error(`docket-runner register: ${registered.stdout}${registered.stderr}`);
  start("runner", [cli, "listen"], { DOCKET_RUNNER_HOME: env.DOCKET_RUNNER_HOME });
}

/**
 * The autopilot project watching acme/widgets's issues through the GitHub stand-in, or the Linear
 * team ENG's through the Linear stand-in (its runs clone and push the bare remote, as GitHub's
 * issues point there); its runs launch the sample agent, and its pull requests go to acme/widgets.
 */
async function createProject(admin, { github, linear, privateKey, webhookSecret, remote }) {
  const run = { launch: { command: [process.execPath, join(ROOT, "scripts", "demo-agent.mjs")] }, labels: [] };
  const where = linear
    ? { tracker: { kind: "linear", api_url: linear.url, api_key: linear.api_key, workspace: "acme", team: TEAM, ready_label: "ready", review_state: "In Review" }, run: { ...run, repository_url: remote } }
    : { ready_label: "ready", run };
  return must(201, "POST", "/v1/autopilot/projects", {
    token: admin,
    body: {
      name: "widgets",
      repository: REPOSITORY,
      ...where,
      webhook_secret: webhookSecret,
      github: { api_url: github.url, app_id: "1001", installation_id: "2002", private_key: privateKey },
    },
  });
}

const BRIEF = `## Agent Brief

goal: Greet the world at the end of the README.
acceptance:
- README.md ends with the line "Hello, world!"
scope:
- README.md
`;

/**
 * Opens the Linear issue ENG-1 in the stand-in, created and labelled ready by Alice Human, whose
 * webhooks the stand-in signs and sends to the project's door, subscribed here.
 */
async function openLinearIssue(linear, project, webhookSecret) {
  await linear.send({ op: "team", key: TEAM, name: "Engineering" });
  await linear.send({ op: "label", name: "ready" });
  await linear.send({ op: "subscribe", url: project.webhook.url, secret: webhookSecret, team: TEAM });
  const opened = await linear.send({ op: "open_issue", team: TEAM, title: "Greet the world", description: BRIEF, label: "ready", by: "Alice Human" });
  if (!opened.deliveries.every((status) => status === 202)) throw new Error(`the project's Linear door answered its webhooks ${opened.deliveries.join(", ")}`);
}

/** Opens the issue in the stand-in, labelled ready by alice, and delivers the webhook GitHub would send. */
async function openIssue(github, projectId, webhookSecret) {
  await github.send({ op: "open_issue", repository: REPOSITORY, number: ISSUE, title: "Greet the world", body: BRIEF, label: "ready", by: "alice" });
  const payload = { action: "labeled", label: { name: "ready" }, issue: { number: ISSUE }, repository: { full_name: REPOSITORY }, sender: { login: "alice", type: "User" } };
  const delivered = await deliverWebhook({ url: base }, projectId, "issues", payload, { secret: webhookSecret });
  if (delivered.status !== 202) throw new Error(`the webhook answered ${delivered.status}: ${JSON.stringify(delivered.body)}`);
}

/** The ticket once the issue is admitted; meanwhile, each new error the project shows (it could not read the stand-in) is printed. */
async function waitForAdmission(admin, projectId) {
  let shown = null;
  return eventually(`issue ${ISSUE_NAME} to be admitted`, async () => {
    const t = await api("GET", `/v1/autopilot/projects/${projectId}/tickets/${ISSUE}`, { token: admin });
    if (t.status === 200 && t.body.run_id) return t.body;
    const { last_error: error } = await must(200, "GET", `/v1/autopilot/projects/${projectId}`, { token: admin });
    if (error && error.at_ms !== shown) step(`the project's last error (${error.door}, ${error.failure}): ${error.message}`);
    shown = error?.at_ms ?? shown;
    return null;
  }, timeoutMs, 500);
}

/** Prints each state the run goes through until its pull request is stored; answers the run. */
async function followRun(admin, runId) {
  let last = "";
  return eventually(() => `run ${runId} to open its pull request (last state: ${last})`, async () => {
    const run = await must(200, "GET", `/v1/runs/${runId}`, { token: admin });
    if (run.state !== last) step(`run ${runId} is ${(last = run.state)}`);
    if (["failed", "cancelled"].includes(run.state)) throw new Error(`the run ended ${run.state}: ${JSON.stringify(run.last_error ?? run)}`);
    return run.publication?.pr ? run : null;
  }, timeoutMs, 500);
}

async function main() {
  const adminSecret = `demo-${randomBytes(12).toString("hex")}`;
  const webhookSecret = randomBytes(16).toString("hex");
  step(`its files, logs included, are in ${work} (removed when Ctrl-C stops it)`);
  const remote = makeRemote();
  step(`made the bare git remote of ${REPOSITORY}: ${remote}`);
  const keys = makeAppKeyPair();
  writeFileSync(join(work, "app-key.pub"), keys.publicKey);
  const github = await startGitHub(join(work, "app-key.pub"));
  step(`the GitHub stand-in answers at ${github.url} (scripts/fake-github.mjs)`);
  const linear = tracker === "linear" ? await startStandIn("linear", "fake-linear.mjs", {}) : null;
  if (linear) step(`the Linear stand-in answers at ${linear.url} (scripts/fake-linear.mjs)`);
  step(`starting Docket at ${base} as npm start does (its output: ${join(work, "docket.log")})…`);
  await startDocket(adminSecret);
  const org = await must(201, "POST", "/v1/orgs", { token: adminSecret, body: { name: "demo" } });
  const admin = org.token.token;
  const registration = await must(201, "POST", "/v1/tokens", { token: admin, body: { kind: "registration" } });
  startRunner(registration.token);
  step(`a runner is registered and listening (runner-cli; its output: ${join(work, "runner.log")})`);
  const project = await createProject(admin, { github, linear, privateKey: keys.privateKey, webhookSecret, remote });
  if (linear) {
    await github.send({ op: "repository", repository: REPOSITORY });
    step(`created the autopilot project ${project.id} for the Linear team ${TEAM}, its pull requests to ${REPOSITORY}`);
    await openLinearIssue(linear, project, webhookSecret);
    step(`opened Linear issue ${ISSUE_NAME} "Greet the world", labelled ready by Alice Human; the stand-in delivered its signed webhooks`);
  } else {
    step(`created the autopilot project ${project.id} for ${REPOSITORY}`);
    await openIssue(github, project.id, webhookSecret);
    step(`opened issue ${ISSUE_NAME} "Greet the world", labelled ready by alice, and delivered its signed webhook`);
  }
  printWhereToWatch(admin, project.id);
  const ticket = await waitForAdmission(admin, project.id);
  step(`issue ${ISSUE_NAME} was admitted as run ${ticket.run_id}: ${base}/dash/runs/${ticket.run_id}`);
  const run = await followRun(admin, ticket.run_id);
  step(`pull request opened: #${run.publication.pr.number} ${run.publication.pr.url} (the stand-in's), from branch docket/${run.id} pushed to ${remote}`);
  if (linear) await followLinearIssue(linear);
  step("Docket keeps running for you to look around; Ctrl-C stops everything.");
}

/** Waits for the Linear issue to move to review with the pull request attached (the run's tracker deliveries), and says so. */
async function followLinearIssue(linear) {
  const issue = await eventually(`Linear issue ${ISSUE_NAME} to move to In Review with its pull request attached`, async () => {
    const read = await linear.send({ op: "issue", identifier: ISSUE_NAME });
    return read.state === "In Review" && read.attachments.length > 0 ? read : null;
  }, timeoutMs, 500);
  step(`Linear issue ${ISSUE_NAME} moved to ${issue.state}, the pull request attached: ${issue.attachments.join(", ")}`);
}

function printWhereToWatch(admin, projectId) {
  console.log(`
  Watch it in the console: ${base}/dash/sign-in, signed in with the admin token
    ${admin}
  then the issue's ticket (its status, its run, why it waits, the last error reading it):
    ${base}/dash/autopilot/${projectId}/tickets/${ISSUE}
  The project's ticket, through the API:
    curl -s ${base}/v1/autopilot/projects/${projectId}/tickets/${ISSUE} -H 'Authorization: Bearer ${admin}'
`);
}

main().catch((e) => stop(1, e instanceof Error ? e.message : String(e)));
