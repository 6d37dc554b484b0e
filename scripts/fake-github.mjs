#!/usr/bin/env node
// The GitHub stand-in as a process of its own: the tests' fake GitHub (test/fake-github/server.mjs,
// the REST endpoints autopilot uses, over real HTTP on loopback) served until this process is
// stopped, for `npm run demo` and for trying autopilot by hand. Its model is changed through
// stdin, one JSON command a line, each answered by one JSON line on stdout.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { startFakeGitHub } from "../test/fake-github/server.mjs";
import { helpOrRefuse } from "./cli-args.mjs";

helpOrRefuse("node scripts/fake-github.mjs", () => `node scripts/fake-github.mjs: a local GitHub stand-in (the tests' fake) on 127.0.0.1, until
stopped (Ctrl-C, or stdin closed). It prints {"url": "http://127.0.0.1:<port>"} once it listens; give
that URL as an autopilot project's github.api_url. It accepts installation tokens for one App, and
reads branches for pull requests from local bare repositories.

Environment:
  FAKE_GITHUB_APP_ID            1001   the App id it accepts JWTs for
  FAKE_GITHUB_INSTALLATION_ID   2002   that App's installation
  FAKE_GITHUB_PUBLIC_KEY_FILE   none   the App's public key (PEM); without it a JWT's signature is
                                       not checked, only its shape and claims
  FAKE_GITHUB_REPOSITORIES      none   a directory of bare repositories, <dir>/<owner>/<repo>: issues'
                                       html_url point there, so runs clone and push there

Commands on stdin, one JSON object a line; each answers one line, {"ok": true, …} or {"ok": false, "error"}:
  {"op": "open_issue", "repository": "acme/widgets", "number": 1, "title": "…", "body": "…",
   "label": "ready", "by": "alice"}     an issue, then the label added by that person
  {"op": "repository", "repository": "acme/widgets"}    pull requests of it read their branches from
                                       its bare repository (open_issue does this too)
  {"op": "pulls", "repository": "acme/widgets"}     the repository's pull requests`);

const publicKeyFile = process.env.FAKE_GITHUB_PUBLIC_KEY_FILE;
const repositories = process.env.FAKE_GITHUB_REPOSITORIES;
const github = await startFakeGitHub({
  appId: process.env.FAKE_GITHUB_APP_ID || "1001",
  installationId: process.env.FAKE_GITHUB_INSTALLATION_ID || "2002",
  publicKey: publicKeyFile ? readFileSync(publicKeyFile, "utf8") : null,
  ...(repositories ? { htmlUrlBase: repositories } : {}),
});
const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);
say({ url: github.url });

/** What each command does to the stand-in's model. */
const COMMANDS = {
  open_issue({ repository, number, title, body = "", label, by = "alice" }) {
    if (typeof repository !== "string" || !Number.isSafeInteger(number) || typeof label !== "string") {
      throw new Error("open_issue needs repository (owner/name), number (a whole number) and label");
    }
    if (repositories) github.publication.useBareRepository(repository, `${repositories}/${repository}`);
    github.state.addIssue(repository, number, { title, body, labels: [label] });
    github.state.label(repository, number, label, { login: by, type: "User" });
    return { issue: `${repository}#${number}` };
  },
  repository({ repository }) {
    if (typeof repository !== "string" || !repositories) throw new Error("repository needs repository (owner/name) and FAKE_GITHUB_REPOSITORIES");
    github.publication.useBareRepository(repository, `${repositories}/${repository}`);
    return { repository };
  },
  pulls({ repository }) {
    return { pulls: github.publication.pulls(repository) };
  },
};

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  try {
    const command = JSON.parse(line);
    const run = COMMANDS[command?.op];
    if (!run) throw new Error(`unknown op ${JSON.stringify(command?.op)}; the ops are ${Object.keys(COMMANDS).join(", ")}`);
    say({ ok: true, ...run(command) });
  } catch (e) {
    say({ ok: false, error: e instanceof Error ? e.message : String(e) });
  }
});

const stop = () => github.close().then(() => process.exit(0));
lines.on("close", stop);
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, stop);
