// A fake of the few GitHub REST endpoints autopilot reads (API version 2022-11-28), served over
// real HTTP on loopback so the production provider (src/autopilot/github/) runs against it as it
// would against api.github.com: an installation token from the App's JWT, issues, blocked_by
// dependencies, issue events and the labeled-issues list, with GitHub's JSON field names, Link
// pagination and rate-limit headers; and the writes tracker deliveries make (issue comments, label
// changes). Tests set the model up and inject faults; never the internet.
//
// Conditional requests as GitHub answers them (REST docs, "Best practices"): every 200 GET carries a
// weak ETag of its representation; a request whose If-None-Match names it gets 304 with no body,
// which does not count against the installation's rate limit. Every other answer to an installation
// request counts: x-ratelimit-remaining goes down by one, and `counted()` says how many there were.

import { createHash, createPublicKey, generateKeyPairSync, randomBytes, verify } from "node:crypto";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";

/** An RSA key pair as GitHub hands an App's key out: PKCS#1 PEM (with its PKCS#8 and public forms). */
export function makeAppKeyPair() {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    privateKey: privateKey.export({ type: "pkcs1", format: "pem" }).toString(),
    privateKeyPkcs8: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKey: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

const DOCS = "https://docs.github.com/rest";
const TOKEN_TTL_MS = 3_600_000;

/**
 * Starts the fake. `appId`, `installationId` and `publicKey` (PEM) are the App it accepts JWTs
 * for; without a public key the JWT's shape and claims are checked but not its signature.
 */
export async function startFakeGitHub({ appId = "1001", installationId = "2002", publicKey = null, htmlUrlBase = "https://github.com" } = {}) {
  const issues = new Map(); // "owner/repo#n" -> issue model
  const blockedBy = new Map(); // "owner/repo#n" -> ["owner/repo#m", ...]
  const events = new Map(); // "owner/repo#n" -> [event, ...] oldest first
  const unreadable = new Set(); // lower-cased "owner/repo" the installation cannot read
  const tokens = new Map(); // token -> expiresAtMs
  const faults = []; // { match, status, headers, body, delayMs, times }
  const requests = [];
  const rateLimit = { limit: 5_000, used: 0, resetAtS: Math.ceil(Date.now() / 1000) + 3_600 };
  let nextId = 5_000;
  let server;
  let base;

  const key = (repository, number) => `${repository.toLowerCase()}#${number}`;
  const user = (login, type = "User") => ({
    login,
    id: loginId(login),
    node_id: `U_${login}`,
    avatar_url: `https://avatars.githubusercontent.com/u/${loginId(login)}?v=4`,
    url: `${base}/users/${login}`,
    html_url: `https://github.com/${login}`,
    type,
    site_admin: false,
  });

  function issueJson(model) {
    const repoUrl = `${base}/repos/${model.repository}`;
    const json = {
      url: `${repoUrl}/issues/${model.number}`,
      repository_url: repoUrl,
      labels_url: `${repoUrl}/issues/${model.number}/labels{/name}`,
      comments_url: `${repoUrl}/issues/${model.number}/comments`,
      events_url: `${repoUrl}/issues/${model.number}/events`,
      // `htmlUrlBase` (a local directory in tests) makes the repository URL admission derives a local bare repository.
      html_url: `${htmlUrlBase}/${model.repository}/${model.pullRequest ? "pull" : "issues"}/${model.number}`,
      id: model.id,
      node_id: `I_${model.id}`,
      number: model.number,
      title: model.title,
      user: user(model.author),
      labels: model.labels.map((name) => ({ id: loginId(name), node_id: `LA_${name}`, url: `${repoUrl}/labels/${encodeURIComponent(name)}`, name, color: "0e8a16", default: false, description: null })),
      state: model.state,
      state_reason: model.stateReason,
      locked: false,
      assignee: null,
      assignees: [],
      milestone: null,
      comments: trackerWrites.store.get(key(model.repository, model.number))?.length ?? 0,
      created_at: new Date(model.createdAtMs).toISOString(),
      updated_at: new Date(model.updatedAtMs).toISOString(),
      closed_at: model.state === "closed" ? new Date(model.updatedAtMs).toISOString() : null,
      author_association: "OWNER",
      active_lock_reason: null,
      body: model.body,
    };
    if (model.pullRequest) {
      json.pull_request = { url: `${repoUrl}/pulls/${model.number}`, html_url: json.html_url, diff_url: `${json.html_url}.diff`, patch_url: `${json.html_url}.patch`, merged_at: null };
      json.draft = false;
    }
    return json;
  }

  function eventJson(model, event) {
    return {
      id: event.id,
      node_id: `LE_${event.id}`,
      url: `${base}/repos/${model.repository}/issues/events/${event.id}`,
      actor: event.actor === null ? null : user(event.actor.login, event.actor.type ?? "User"),
      event: event.event,
      commit_id: null,
      commit_url: null,
      created_at: new Date(event.atMs).toISOString(),
      ...(event.label ? { label: { name: event.label, color: "0e8a16" } } : {}),
      performed_via_github_app: event.viaApp
        ? { id: loginId(event.viaApp), slug: event.viaApp, node_id: `A_${event.viaApp}`, name: event.viaApp, owner: user("app-owner", "Organization"), description: "", external_url: "", html_url: `https://github.com/apps/${event.viaApp}`, created_at: "2024-01-01T00:00:00Z", updated_at: "2024-01-01T00:00:00Z", permissions: {}, events: [] }
        : null,
    };
  }

  // ---- the model tests set up ----
  const state = {
    /** Adds (or replaces) an issue; `labels` names, `pullRequest` true for a pull request. */
    addIssue(repository, number, { title = `Issue ${number}`, body = "", labels = [], state: s = "open", stateReason = null, pullRequest = false, author = "octocat", createdAtMs = Date.now() } = {}) {
      const model = { id: nextId++, repository, number, title, body, labels: [...labels], state: s, stateReason, pullRequest, author, createdAtMs, updatedAtMs: createdAtMs };
      issues.set(key(repository, number), model);
      return model;
    },
    /** Changes an issue's fields (title, body, labels, state, stateReason). */
    updateIssue(repository, number, patch) {
      const model = mustIssue(repository, number);
      Object.assign(model, patch, { updatedAtMs: Date.now() });
      return model;
    },
    /** Adds `label` to the issue and records the `labeled` event GitHub would, by `actor` ({login, type}), through `viaApp` (an app slug) if given. */
    label(repository, number, label, actor = { login: "octocat", type: "User" }, { viaApp = null, atMs = Date.now() } = {}) {
      const model = mustIssue(repository, number);
      if (!model.labels.some((l) => l.toLowerCase() === label.toLowerCase())) model.labels.push(label);
      model.updatedAtMs = atMs;
      return state.addEvent(repository, number, { event: "labeled", label, actor, viaApp, atMs });
    },
    unlabel(repository, number, label, actor = { login: "octocat", type: "User" }) {
      const model = mustIssue(repository, number);
      model.labels = model.labels.filter((l) => l.toLowerCase() !== label.toLowerCase());
      model.updatedAtMs = Date.now();
      return state.addEvent(repository, number, { event: "unlabeled", label, actor });
    },
    /** Appends a raw event ({event, label?, actor: {login, type} | null, viaApp?, atMs?}); returns its id. */
    addEvent(repository, number, { event, label = null, actor = { login: "octocat", type: "User" }, viaApp = null, atMs = Date.now() }) {
      mustIssue(repository, number);
      const list = events.get(key(repository, number)) ?? [];
      const id = nextId++;
      list.push({ id, event, label, actor, viaApp, atMs });
      events.set(key(repository, number), list);
      return id;
    },
    /** Sets the issues blocking `repository#number`: [[blockerRepository, blockerNumber], ...]. */
    setBlockedBy(repository, number, blockers) {
      blockedBy.set(key(repository, number), blockers.map(([r, n]) => key(r, n)));
    },
    /** The installation cannot read this repository: every read of it answers 404, as GitHub does. */
    hideRepository(repository) {
      unreadable.add(repository.toLowerCase());
    },
    /**
     * The next `times` requests whose path matches `path` (a RegExp or substring; any when null)
     * answer `status` with `headers` and a GitHub error body, after `delayMs` (a hang when large).
     */
    fail({ path = null, method = null, status = 500, headers = {}, message = "Server Error", delayMs = 0, times = 1 } = {}) {
      faults.push({ path, method, status, headers, message, delayMs, times });
    },
    /** The next `times` matching requests wait `delayMs` before answering normally. */
    delay({ path = null, method = null, delayMs, times = 1 }) {
      faults.push({ path, method, status: null, headers: {}, message: null, delayMs, times });
    },
    /** The next `times` matching requests get a 200's headers and the start of a body, then nothing more. */
    stallBody({ path = null, method = null, times = 1 }) {
      faults.push({ path, method, status: null, headers: {}, message: null, delayMs: 0, times, stallBody: true });
    },
    /** GitHub's primary rate limit: 403 with x-ratelimit-remaining 0, resetting `resetInS` seconds from now. */
    rateLimit({ path = null, resetInS, times = 1 }) {
      state.fail({
        path,
        status: 403,
        message: `API rate limit exceeded for installation ID ${installationId}. If you reach out to GitHub Support for help, please include the request ID.`,
        headers: { "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000", "x-ratelimit-resource": "core", "x-ratelimit-reset": String(Math.ceil(Date.now() / 1000) + resetInS) },
        times,
      });
    },
    /** GitHub's secondary rate limit: 429 with retry-after `retryAfterS`. */
    secondaryRateLimit({ path = null, retryAfterS, times = 1 }) {
      state.fail({
        path,
        status: 429,
        message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        headers: { "retry-after": String(retryAfterS), "x-ratelimit-remaining": "4000" },
        times,
      });
    },
    /** The next `times` matching requests are carried out, but answered 502 (the answer is lost). */
    loseAnswer({ path = null, method = null, times = 1 } = {}) {
      faults.push({ path, method, status: null, headers: {}, message: "Bad Gateway", delayMs: 0, times, lostAnswer: true });
    },
    /** The issue as the fake holds it ({title, body, labels, state, ...}). */
    issue: (repository, number) => mustIssue(repository, number),
    /** The issue as GitHub shows it, in the REST API and in a webhook payload's `issue`. */
    issueJson: (repository, number) => issueJson(mustIssue(repository, number)),
    /** The issue's comments, oldest first ({id, body, login, html_url}). */
    comments: (repository, number) => trackerWrites.comments(repository, number),
    /** A person comments on the issue (a reply to a blocker). */
    addComment: (repository, number, body, login = "octocat") => trackerWrites.add(repository, number, body, { login, type: "User" }),
    /** The installation's rate limit: `remaining` left of `limit` until `resetInS` from now (as GitHub would state it). */
    setRateLimit({ limit = rateLimit.limit, remaining, resetInS = 3_600 }) {
      Object.assign(rateLimit, { limit, used: limit - remaining, resetAtS: Math.ceil(Date.now() / 1000) + resetInS });
    },
    /** Installation tokens issued so far. */
    tokensIssued: () => requests.filter((r) => r.method === "POST" && r.path.endsWith("/access_tokens") && r.status === 201).length,
  };

  // ---- tracker deliveries: issue comments and label changes (POST/DELETE), as the App makes them ----
  const APP_BOT = { login: "docket[bot]", type: "Bot" };
  const trackerWrites = {
    store: new Map(), // "owner/repo#n" -> [{ id, body, login, type, atMs }]
    comments(repository, number) {
      return (this.store.get(key(repository, number)) ?? []).map((c) => ({ id: c.id, body: c.body, login: c.login, html_url: commentUrl(repository, number, c.id) }));
    },
    add(repository, number, body, actor) {
      const model = mustIssue(repository, number);
      const list = this.store.get(key(repository, number)) ?? [];
      const comment = { id: nextId++, body, login: actor.login, type: actor.type, atMs: Date.now() };
      // As on GitHub, a comment changes the issue: its comment count and updated_at (so its ETag).
      model.updatedAtMs = comment.atMs;
      list.push(comment);
      this.store.set(key(repository, number), list);
      return comment;
    },
    /** Handles the write endpoints and the comment list; false for anything else. */
    route(req, res, url, repoPath) {
      const repository = `${decodeURIComponent(repoPath[1])}/${decodeURIComponent(repoPath[2])}`;
      const rest = repoPath[3] ?? "";
      let m;
      if ((m = /^\/issues\/(\d+)\/comments$/.exec(rest))) {
        const model = issues.get(key(repository, Number(m[1])));
        if (!model || unreadable.has(repository.toLowerCase())) return notFound(res), true;
        if (req.method === "GET") return paginate(res, url, (this.store.get(key(repository, model.number)) ?? []).map((c) => commentJson(repository, model.number, c))), true;
        if (req.method !== "POST") return false;
        const body = parseBody(req);
        if (typeof body?.body !== "string" || body.body === "") return error(res, 422, "Validation Failed"), true;
        const comment = this.add(repository, model.number, body.body, APP_BOT);
        return send(res, 201, commentJson(repository, model.number, comment)), true;
      }
      if ((m = /^\/issues\/(\d+)\/labels$/.exec(rest)) && req.method === "POST") {
        const model = issues.get(key(repository, Number(m[1])));
        if (!model) return notFound(res), true;
        const body = parseBody(req);
        const names = Array.isArray(body) ? body : body?.labels;
        if (!Array.isArray(names)) return error(res, 422, "Validation Failed"), true;
        for (const name of names) state.label(repository, model.number, String(name), APP_BOT, { viaApp: "docket" });
        return send(res, 200, model.labels.map((name) => ({ name }))), true;
      }
      if ((m = /^\/issues\/(\d+)\/labels\/([^/]+)$/.exec(rest)) && req.method === "DELETE") {
        const model = issues.get(key(repository, Number(m[1])));
        const name = decodeURIComponent(m[2]);
        if (!model || !model.labels.some((l) => l.toLowerCase() === name.toLowerCase())) return error(res, 404, "Label does not exist"), true;
        state.unlabel(repository, model.number, name, APP_BOT);
        return send(res, 200, model.labels.map((label) => ({ name: label }))), true;
      }
      return false;
    },
  };
  const commentUrl = (repository, number, id) => `https://github.com/${repository}/issues/${number}#issuecomment-${id}`;
  const commentJson = (repository, number, c) => ({
    id: c.id,
    node_id: `IC_${c.id}`,
    url: `${base}/repos/${repository}/issues/comments/${c.id}`,
    html_url: commentUrl(repository, number, c.id),
    issue_url: `${base}/repos/${repository}/issues/${number}`,
    body: c.body,
    user: user(c.login, c.type),
    created_at: new Date(c.atMs).toISOString(),
    updated_at: new Date(c.atMs).toISOString(),
    author_association: c.type === "Bot" ? "NONE" : "OWNER",
  });
  function parseBody(req) {
    try {
      return JSON.parse(req.rawBody || "null");
    } catch {
      return null;
    }
  }

  function mustIssue(repository, number) {
    const model = issues.get(key(repository, number));
    if (!model) throw new Error(`fake GitHub: no issue ${repository}#${number}`);
    return model;
  }

  // ---- HTTP ----
  function send(res, status, body, headers = {}) {
    const text = body === null ? "" : JSON.stringify(body);
    const req = res.req;
    const etag = req?.method === "GET" && status === 200 ? `W/"${createHash("sha1").update(text).digest("hex")}"` : null;
    const notModified = etag !== null && (req.headers["if-none-match"] ?? "").split(",").some((tag) => tag.trim() === etag);
    const counted = !notModified && !(req?.url ?? "").includes("/access_tokens");
    if (counted) rateLimit.used += 1;
    const limits = {
      "x-ratelimit-limit": String(rateLimit.limit),
      "x-ratelimit-remaining": String(Math.max(0, rateLimit.limit - rateLimit.used)),
      "x-ratelimit-used": String(rateLimit.used),
      "x-ratelimit-reset": String(rateLimit.resetAtS),
      "x-ratelimit-resource": "core",
    };
    if (notModified) {
      res.writeHead(304, { etag, "x-github-api-version-selected": "2022-11-28", ...limits, ...headers });
      return res.end();
    }
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "x-github-api-version-selected": "2022-11-28", ...limits, ...(etag ? { etag } : {}), ...headers });
    res.end(text);
  }
  const error = (res, status, message, headers = {}) => send(res, status, { message, documentation_url: DOCS, status: String(status) }, headers);
  const notFound = (res) => error(res, 404, "Not Found");

  /** One page of `items`, each shown by `toJson` (only the page's: a list of 10,000 issues stays cheap to page through). */
  function paginate(res, url, items, toJson = (item) => item) {
    const perPage = Math.min(100, Number(url.searchParams.get("per_page") ?? 30));
    const page = Math.max(1, Number(url.searchParams.get("page") ?? 1));
    const last = Math.max(1, Math.ceil(items.length / perPage));
    const link = (p, rel) => {
      const u = new URL(url.pathname + url.search, base);
      u.searchParams.set("per_page", String(perPage));
      u.searchParams.set("page", String(p));
      return `<${u}>; rel="${rel}"`;
    };
    const links = [];
    if (page > 1) links.push(link(page - 1, "prev"));
    if (page < last) links.push(link(page + 1, "next"), link(last, "last"));
    if (page > 1) links.push(link(1, "first"));
    send(res, 200, items.slice((page - 1) * perPage, page * perPage).map(toJson), links.length ? { link: links.join(", ") } : {});
  }

  function checkJwt(authorization) {
    const match = /^bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/i.exec(authorization ?? "");
    if (!match) return "A JSON web token could not be decoded";
    const [, h, p, sig] = match;
    let header, payload;
    try {
      header = JSON.parse(Buffer.from(h, "base64url").toString());
      payload = JSON.parse(Buffer.from(p, "base64url").toString());
    } catch {
      return "A JSON web token could not be decoded";
    }
    if (header.alg !== "RS256") return "'alg' must be RS256";
    if (String(payload.iss) !== String(appId)) return "'Issuer' claim ('iss') must be an Integer";
    const now = Math.floor(Date.now() / 1000);
    if (!(payload.exp > now) || payload.exp - payload.iat > 600 + 60) return "'Expiration time' claim ('exp') is too far in the future";
    if (publicKey && !verify("RSA-SHA256", Buffer.from(`${h}.${p}`), createPublicKey(publicKey), Buffer.from(sig, "base64url"))) {
      return "A JSON web token could not be decoded";
    }
    return null;
  }

  function tokenOk(authorization) {
    const match = /^(?:token|bearer) (\S+)$/i.exec(authorization ?? "");
    const expiresAt = match ? tokens.get(match[1]) : undefined;
    return expiresAt !== undefined && expiresAt > Date.now();
  }

  // ---- publication (docs/autopilot.md, "Publication"): push tokens with their requested scope,
  // branches read from a local bare repository, pull requests with GitHub's `head` filter (a bare
  // branch name is ignored, as GitHub does: every open pull request is listed), creation (422 on a
  // duplicate head) and a crash after creation (the PR is made, then the connection dropped).
  const pulls = []; // { repository, number, head, base, title, body, state }
  const bareRepositories = new Map(); // lower-cased "owner/repo" -> bare repository path
  let crashesAfterCreate = 0;
  const publication = {
    /** Branches of `repository` are read from this bare repository (`git --git-dir <bare> rev-parse`). */
    useBareRepository(repository, bare) {
      bareRepositories.set(repository.toLowerCase(), bare);
    },
    /** The next `times` pull request creations make the PR, then drop the connection before answering. */
    crashAfterPullCreation(times = 1) {
      crashesAfterCreate += times;
    },
    /** Adds a pull request as if someone opened it. */
    addPull(repository, { head, base = "main", title = "A pull request", body = "", state: s = "open" }) {
      const pull = { repository, number: nextPullNumber(repository), head, base, title, body, state: s };
      pulls.push(pull);
      return pull;
    },
    pulls: (repository) => pulls.filter((p) => !repository || p.repository.toLowerCase() === repository.toLowerCase()),
    /** Ends every injected fault (an outage is over). */
    clearFaults() {
      faults.length = 0;
    },
    /** The bodies of the installation token requests narrowed to repositories (push tokens). */
    pushTokenRequests: () => requests.filter((r) => r.path.endsWith("/access_tokens") && r.body?.repositories).map((r) => ({ repositories: r.body.repositories, permissions: r.body.permissions, status: r.status })),
  };

  function nextPullNumber(repository) {
    const numbers = [...issues.values(), ...pulls].filter((i) => i.repository.toLowerCase() === repository.toLowerCase()).map((i) => i.number);
    return Math.max(0, ...numbers) + 1;
  }

  function branchSha(repository, branch) {
    const bare = bareRepositories.get(repository.toLowerCase());
    if (!bare) return null;
    try {
      return execFileSync("git", ["--git-dir", bare, "rev-parse", "--verify", "--quiet", `refs/heads/${branch}`], { encoding: "utf8" }).trim() || null;
    } catch {
      return null;
    }
  }

  function pullJson(pull) {
    const [owner] = pull.repository.split("/");
    return {
      url: `${base}/repos/${pull.repository}/pulls/${pull.number}`,
      id: 90_000 + pull.number,
      number: pull.number,
      state: pull.state,
      title: pull.title,
      body: pull.body,
      html_url: `https://github.com/${pull.repository}/pull/${pull.number}`,
      head: { label: `${owner}:${pull.head}`, ref: pull.head, sha: branchSha(pull.repository, pull.head), repo: { full_name: pull.repository } },
      base: { label: `${owner}:${pull.base}`, ref: pull.base, repo: { full_name: pull.repository } },
    };
  }

  /** Answers the publication endpoints; false leaves the request to the issue routes. */
  function routePublication(req, res, url, repository, rest) {
    let m;
    if (req.method === "GET" && rest === "") return send(res, 200, { full_name: repository, default_branch: "main", private: true }), true;
    // Octokit sends the ref's slashes encoded (heads%2Fdocket%2F…); GitHub accepts both.
    if (req.method === "GET" && (m = /^\/git\/ref\/heads\/(.+)$/.exec(decodeURIComponent(rest)))) {
      const branch = m[1];
      const sha = branchSha(repository, branch);
      return (sha ? send(res, 200, { ref: `refs/heads/${branch}`, object: { sha, type: "commit" } }) : notFound(res)), true;
    }
    if (req.method === "GET" && (m = /^\/branches\/(.+)$/.exec(decodeURIComponent(rest)))) {
      const branch = m[1];
      const sha = branchSha(repository, branch);
      return (sha ? send(res, 200, { name: branch, commit: { sha } }) : notFound(res)), true;
    }
    if (req.method === "GET" && rest === "/pulls") {
      const head = url.searchParams.get("head");
      const stateFilter = url.searchParams.get("state") ?? "open";
      const [owner] = repository.split("/");
      // GitHub filters by `owner:branch` only; a bare branch name filters nothing.
      const byHead = head && head.includes(":") ? (p) => `${owner}:${p.head}`.toLowerCase() === head.toLowerCase() : () => true;
      const list = publication.pulls(repository).filter((p) => stateFilter === "all" || p.state === stateFilter).filter(byHead);
      return paginate(res, url, list.map(pullJson)), true;
    }
    if (req.method === "POST" && rest === "/pulls") {
      const { head, base: baseBranch, title = "", body = "" } = req.body ?? {};
      const [owner] = repository.split("/");
      const branch = String(head ?? "").replace(new RegExp(`^${owner}:`, "i"), "");
      if (!branch || !branchSha(repository, branch)) return send(res, 422, { message: "Validation Failed", errors: [{ resource: "PullRequest", field: "head", code: "invalid" }], documentation_url: DOCS, status: "422" }), true;
      if (publication.pulls(repository).some((p) => p.head === branch && p.state === "open")) {
        return send(res, 422, { message: "Validation Failed", errors: [{ resource: "PullRequest", code: "custom", message: `A pull request already exists for ${owner}:${branch}.` }], documentation_url: DOCS, status: "422" }), true;
      }
      const pull = publication.addPull(repository, { head: branch, base: baseBranch ?? "main", title, body });
      if (crashesAfterCreate > 0) {
        crashesAfterCreate -= 1;
        res.destroy(); // created, and the answer never arrives
        return true;
      }
      return send(res, 201, pullJson(pull)), true;
    }
    return false;
  }

  function route(req, res, url) {
    const path = url.pathname;
    const tokenPath = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(path);
    if (req.method === "POST" && tokenPath) {
      const problem = checkJwt(req.headers.authorization);
      if (problem) return error(res, 401, problem);
      if (tokenPath[1] !== String(installationId)) return notFound(res);
      const token = `ghs_${randomBytes(18).toString("hex")}`;
      const expiresAtMs = Date.now() + TOKEN_TTL_MS;
      tokens.set(token, expiresAtMs);
      return send(res, 201, { token, expires_at: new Date(expiresAtMs).toISOString().replace(/\.\d{3}Z$/, "Z"), permissions: { issues: "read", metadata: "read" }, repository_selection: "all" });
    }
    if (!tokenOk(req.headers.authorization)) return error(res, 401, "Bad credentials");
    const repoPath = /^\/repos\/([^/]+)\/([^/]+)(\/.*)?$/.exec(path);
    if (repoPath && trackerWrites.route(req, res, url, repoPath)) return;
    if (repoPath && !unreadable.has(`${decodeURIComponent(repoPath[1])}/${decodeURIComponent(repoPath[2])}`.toLowerCase())) {
      if (routePublication(req, res, url, `${decodeURIComponent(repoPath[1])}/${decodeURIComponent(repoPath[2])}`, repoPath[3] ?? "")) return;
    }
    if (req.method !== "GET" || !repoPath) return notFound(res);
    const repository = `${decodeURIComponent(repoPath[1])}/${decodeURIComponent(repoPath[2])}`;
    if (unreadable.has(repository.toLowerCase())) return notFound(res);
    const rest = repoPath[3] ?? "";
    let m;
    if (rest === "/issues") {
      const wanted = (url.searchParams.get("labels") ?? "").split(",").map((l) => l.trim().toLowerCase()).filter(Boolean);
      const stateFilter = url.searchParams.get("state") ?? "open";
      const direction = url.searchParams.get("direction") ?? "desc";
      const sinceMs = url.searchParams.has("since") ? Date.parse(url.searchParams.get("since")) : -Infinity;
      const list = [...issues.values()]
        .filter((i) => i.repository.toLowerCase() === repository.toLowerCase())
        .filter((i) => i.updatedAtMs >= sinceMs)
        .filter((i) => stateFilter === "all" || i.state === stateFilter)
        .filter((i) => wanted.every((w) => i.labels.some((l) => l.toLowerCase() === w)))
        .sort((a, b) => (direction === "asc" ? 1 : -1) * (a.createdAtMs - b.createdAtMs || a.number - b.number));
      return paginate(res, url, list, issueJson);
    }
    if ((m = /^\/issues\/(\d+)$/.exec(rest))) {
      const model = issues.get(key(repository, Number(m[1])));
      return model ? send(res, 200, issueJson(model)) : notFound(res);
    }
    if ((m = /^\/issues\/(\d+)\/dependencies\/blocked_by$/.exec(rest))) {
      const model = issues.get(key(repository, Number(m[1])));
      if (!model) return notFound(res);
      const list = (blockedBy.get(key(repository, model.number)) ?? []).map((k) => issues.get(k)).filter(Boolean);
      return paginate(res, url, list.map(issueJson));
    }
    if ((m = /^\/issues\/(\d+)\/events$/.exec(rest))) {
      const model = issues.get(key(repository, Number(m[1])));
      if (!model) return notFound(res);
      return paginate(res, url, (events.get(key(repository, model.number)) ?? []).map((e) => eventJson(model, e)));
    }
    return notFound(res);
  }

  function takeFault(req, url) {
    const index = faults.findIndex(
      (f) =>
        f.times > 0 &&
        (f.method === null || f.method === req.method) &&
        (f.path === null || (f.path instanceof RegExp ? f.path.test(url.pathname) : url.pathname.includes(f.path))),
    );
    if (index < 0) return null;
    const fault = faults[index];
    fault.times -= 1;
    if (fault.times === 0) faults.splice(index, 1);
    return fault;
  }

  server = createServer((req, res) => {
    const url = new URL(req.url, base);
    const entry = { method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), authorization: req.headers.authorization ?? null, atMs: Date.now(), status: null };
    requests.push(entry);
    const originalWriteHead = res.writeHead.bind(res);
    res.writeHead = (status, ...args) => {
      entry.status = status;
      return originalWriteHead(status, ...args);
    };
    const fault = takeFault(req, url);
    const answer = () => {
      if (res.destroyed) return;
      if (fault?.stallBody) {
        res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": "4096" });
        return res.write('{"number":');
      }
      if (fault?.lostAnswer) {
        // The write happens; its answer never arrives (a connection cut after GitHub acted).
        route(req, { writeHead: () => {}, end: () => {} }, url);
        return error(res, 502, fault.message ?? "Bad Gateway");
      }
      if (fault && fault.status !== null) return error(res, fault.status, fault.message, fault.headers);
      route(req, res, url);
    };
    // The body is kept for what a request asked (a comment's text, a push token's scope, a pull request's fields).
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      req.rawBody = Buffer.concat(chunks).toString("utf8");
      try {
        req.body = req.rawBody ? JSON.parse(req.rawBody) : null;
      } catch {
        req.body = null;
      }
      entry.body = req.body;
      if (fault && fault.delayMs > 0) setTimeout(answer, fault.delayMs).unref();
      else answer();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${server.address().port}`;

  return {
    url: base,
    appId: String(appId),
    installationId: String(installationId),
    state,
    publication,
    requests,
    /** Requests other than the token request, for assertions on what the provider read. */
    reads: () => requests.filter((r) => !r.path.endsWith("/access_tokens")),
    /** Requests that counted against the installation's rate limit (all but token requests and 304s). */
    counted: () => requests.filter((r) => !r.path.endsWith("/access_tokens") && r.status !== 304).length,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

function loginId(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % 100_000_000;
}
