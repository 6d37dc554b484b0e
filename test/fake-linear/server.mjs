// A stand-in for Linear's GraphQL API (https://api.linear.app/graphql), served over real HTTP on
// 127.0.0.1 so Docket's Linear provider runs against it through @linear/sdk as it would against
// Linear. Every request is executed with graphql-js against schema.graphql, the subset of Linear's
// schema Docket uses, so a query for a field the stand-in lacks fails the test. It checks the
// Authorization header (a personal API key as is, an OAuth token as `Bearer …`), answers Linear's
// rate-limit headers, and signs its webhooks as Linear does (webhooks.mjs). Tests drive the
// workspace through `state` (create an issue, label it as a person or an app, complete it, lose
// or repeat a delivery). Never the internet.

import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { buildSchema, graphql, parse, visit } from "graphql";
import { createModel } from "./model.mjs";
import { makeViews } from "./views.mjs";
import { createWebhooks } from "./webhooks.mjs";
import { makeRoot } from "./resolvers.mjs";

const schema = buildSchema(readFileSync(new URL("./schema.graphql", import.meta.url), "utf8"));

/** Linear's documented hourly budgets for an API key: requests, and complexity points. */
const REQUESTS_PER_HOUR = 5_000;
const COMPLEXITY_PER_HOUR = 250_000;

/** A GraphQL error as Linear words it, with the `extensions.type` @linear/sdk maps to its error classes. */
const linearError = (message, type, code) => ({ errors: [{ message, extensions: { type, code, userError: true, userPresentableMessage: message } }] });

/**
 * A query's complexity as Linear counts it, roughly: each object field 1 point, each scalar 0.1,
 * a connection's children times its `first` (50 unless given).
 */
function complexity(document) {
  let points = 0;
  const multipliers = [1];
  visit(document, {
    Field: {
      enter(node) {
        const first = node.arguments?.find((a) => a.name.value === "first" || a.name.value === "last");
        const factor = first?.value.kind === "IntValue" ? Number(first.value.value) : node.selectionSet && ["nodes", "edges"].some((n) => node.selectionSet.selections.some((s) => s.name?.value === n)) ? 50 : 1;
        points += (node.selectionSet ? 1 : 0.1) * multipliers.at(-1);
        multipliers.push(multipliers.at(-1) * factor);
      },
      leave() {
        multipliers.pop();
      },
    },
  });
  return Math.ceil(points);
}

export async function startFakeLinear({ urlKey = "acme", apiKey = "lin_api_docket_test_key", viewer = "Dana Docket" } = {}) {
  const requests = [];
  const budget = { requests: REQUESTS_PER_HOUR, complexity: COMPLEXITY_PER_HOUR, resetAtMs: Date.now() + 3_600_000, exhausted: 0, failingWrites: 0 };
  let lastSent = Promise.resolve([]);
  const model = createModel({ urlKey, onChange: (change) => (lastSent = hooks.onChange(change, nextDelivery.take())) });
  const hooks = createWebhooks(model);
  const nextDelivery = { options: null, take() { const o = this.options; this.options = null; return o ?? undefined; } };
  const views = makeViews(model);
  const viewerUser = model.addUser({ name: viewer });
  model.viewer = viewerUser.id;
  model.apiKeys.set(apiKey, viewerUser.id);
  const root = makeRoot(model, views);

  function rateHeaders(cost) {
    return {
      "x-ratelimit-requests-limit": String(REQUESTS_PER_HOUR),
      "x-ratelimit-requests-remaining": String(Math.max(0, budget.requests)),
      "x-ratelimit-requests-reset": String(budget.resetAtMs),
      "x-complexity": String(cost),
      "x-ratelimit-complexity-limit": String(COMPLEXITY_PER_HOUR),
      "x-ratelimit-complexity-remaining": String(Math.max(0, budget.complexity)),
      "x-ratelimit-complexity-reset": String(budget.resetAtMs),
    };
  }

  function send(res, status, body, headers = {}) {
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
    res.end(JSON.stringify(body));
  }

  /** The user a request's Authorization names: a personal API key as is, an OAuth access token after `Bearer `. */
  function caller(header) {
    const token = (header ?? "").replace(/^Bearer\s+/i, "");
    return model.apiKeys.get(token) ?? null;
  }

  async function handle(req, res, raw) {
    const entry = { method: req.method, path: req.url, authorization: req.headers.authorization ?? null, operation: null, status: 0, atMs: Date.now() };
    requests.push(entry);
    if (req.method !== "POST" || req.url.split("?")[0] !== "/graphql") return send(res, (entry.status = 404), { errors: [{ message: "Not found" }] });
    if (caller(req.headers.authorization) === null) return send(res, (entry.status = 400), linearError("Authentication required, not authenticated", "authentication error", "AUTHENTICATION_ERROR"));
    let request;
    try {
      request = JSON.parse(raw);
    } catch {
      return send(res, (entry.status = 400), linearError("Body is not JSON", "invalid input", "INVALID_INPUT"));
    }
    entry.operation = request.operationName ?? /^\s*(?:query|mutation)\s+(\w+)/.exec(request.query ?? "")?.[1] ?? null;
    entry.query = request.query;
    entry.variables = request.variables ?? {};
    if (budget.exhausted > 0) {
      budget.exhausted -= 1;
      budget.requests = 0;
      return send(res, (entry.status = 400), linearError("Rate limit exceeded", "ratelimited", "RATELIMITED"), rateHeaders(0));
    }
    if (budget.failingWrites > 0 && /^\s*mutation\b/.test(request.query ?? "")) {
      budget.failingWrites -= 1;
      return send(res, (entry.status = 500), linearError("Internal server error", "internal error", "INTERNAL_SERVER_ERROR"));
    }
    let cost = 0;
    try {
      cost = complexity(parse(request.query));
    } catch {
      // graphql() below answers the syntax error.
    }
    budget.requests -= 1;
    budget.complexity -= cost;
    const result = await graphql({ schema, source: request.query, rootValue: root, variableValues: request.variables, operationName: request.operationName });
    const failed = result.errors?.length > 0;
    // Linear answers a request its schema refuses (an unknown field, a wrong argument) with 400.
    entry.status = failed && !result.data ? 400 : 200;
    entry.errors = failed ? result.errors.map((e) => e.message) : null;
    send(res, entry.status, failed ? { data: result.data ?? null, errors: result.errors.map((e) => ({ message: e.message, path: e.path, extensions: { type: "invalid input", code: "INVALID_INPUT" } })) } : { data: result.data }, rateHeaders(cost));
  }

  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => handle(req, res, Buffer.concat(chunks).toString("utf8")).catch((err) => send(res, 500, { errors: [{ message: String(err) }] })));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${server.address().port}`;

  const state = makeState(model, hooks, nextDelivery, () => lastSent, budget);
  return {
    url: `${base}/graphql`,
    apiKey,
    viewer: viewerUser,
    model,
    state,
    requests,
    webhooks: hooks,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** The small API tests drive the workspace through; each change resolves once its webhooks were answered. */
function makeState(model, hooks, nextDelivery, lastSent, budget) {
  const by = (actor) => actor ?? state.person("Alice Human");
  const named = (idOrIdentifier) => {
    const issue = typeof idOrIdentifier === "string" ? model.issue(idOrIdentifier) : idOrIdentifier;
    if (!issue) throw new Error(`the stand-in has no issue ${idOrIdentifier}`);
    return issue;
  };
  const delivered = async (value) => ({ value, deliveries: await lastSent() });
  const people = new Map();
  const state = {
    /** A person (a member of the workspace), made once per name. */
    person(name) {
      if (!people.has(name)) people.set(name, { user: model.addUser({ name }) });
      return people.get(name);
    },
    /** An OAuth application acting as itself: its app user, and the application as botActor. */
    app(name) {
      const key = `app:${name}`;
      if (!people.has(key)) {
        const user = model.addUser({ name, app: true });
        people.set(key, { user, bot: { id: user.id, type: "oauthClient", name } });
      }
      return people.get(key);
    },
    /** An integration or automation (no user at all), as botActor `type`: "github", "workflow", … */
    integration(type) {
      return { bot: { id: null, type, name: type } };
    },
    addTeam: (key, name) => model.addTeam({ key, name }),
    addLabel: (name, team = null) => model.addLabel({ name, teamId: team ? model.team(team).id : null }),
    /** A webhook ({url, secret, resourceTypes}) of the team `team` (its key), or of every team. */
    subscribe: ({ team = null, ...options }) => hooks.subscribe({ ...options, teamId: team ? model.team(team).id : null }),
    createIssue: (opts) => delivered(model.createIssue({ ...opts, by: by(opts.by) })),
    label: (issue, name, actor) => {
      const i = named(issue);
      return delivered(model.updateIssue(i, { addedLabelIds: [model.labelNamed(i.teamId, name).id] }, by(actor)));
    },
    unlabel: (issue, name, actor) => {
      const i = named(issue);
      return delivered(model.updateIssue(i, { removedLabelIds: [model.labelNamed(i.teamId, name).id] }, by(actor)));
    },
    /** Moves the issue to the workflow state named `stateName`. */
    move: (issue, stateName, actor) => {
      const i = named(issue);
      return delivered(model.updateIssue(i, { stateId: model.stateNamed(i.teamId, stateName).id }, by(actor)));
    },
    /** Moves the issue to its team's first state of type `completed`. */
    complete: (issue, actor) => {
      const i = named(issue);
      return delivered(model.updateIssue(i, { stateId: model.statesOf(i.teamId).find((s) => s.type === "completed").id }, by(actor)));
    },
    edit: (issue, { title = null, description = null }, actor) => delivered(model.updateIssue(named(issue), { title, description }, by(actor))),
    /** `blocker` blocks `blocked` (Linear's "blocks" relation). */
    block: (blocker, blocked, actor) => delivered(model.relate(named(blocker), named(blocked), by(actor))),
    comment: (issue, body, actor) => delivered(model.comment(named(issue), body, by(actor))),
    issue: named,
    identifier: (issue) => model.identifier(named(issue)),
    stateOf: (issue) => model.states.get(named(issue).stateId),
    labelsOf: (issue) => named(issue).labelIds.map((id) => model.labels.get(id).name),
    commentsOf: (issue) => named(issue).comments,
    attachmentsOf: (issue) => named(issue).attachments,
    /** The next change's webhook is never sent (Linear gave up on it). */
    loseNextWebhook: (times = 1) => hooks.lose(times),
    /** The next change's webhook carries a webhookTimestamp `ageMs` old. */
    staleNextWebhook: (ageMs) => (nextDelivery.options = { ageMs }),
    /** Sends a delivery again as it was (the same body, signature and Linear-Delivery). */
    redeliver: (delivery) => hooks.redeliver(delivery),
    /** The next `times` mutations (comments, state and label changes, attachments) fail with Linear's 500; reads still answer. */
    failWrites: (times = 1) => (budget.failingWrites = times),
    /** Linear is well again: no write fails, no request is refused. */
    clearFaults: () => Object.assign(budget, { failingWrites: 0, exhausted: 0 }),
    /** The next `times` requests are refused as over Linear's rate limit. */
    rateLimit: (times = 1) => (budget.exhausted += times),
    settled: () => hooks.settled(),
  };
  return state;
}
