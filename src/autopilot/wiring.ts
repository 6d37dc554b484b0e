// The real parts admission runs with (src/autopilot/deps.ts): the D1 project store with its
// encrypted secrets, the project's tracker (GitHub Issues, its traffic recorded per installation in
// D1, or Linear), the GitHub code host, and the pure brief, eligibility and readiness rules.
// A door (the webhook and its queue, reconciliation, tracker deliveries, publication) asks for
// the set of the env it was handed; nothing is installed when a module loads.

import type { Env } from "../env";
import { parseAgentBrief } from "./brief";
import type { AdmissionDeps, AdmissionEnv } from "./deps";
import { checkEligibility } from "./eligibility";
import { githubProvider } from "./github/provider";
import { githubPublisher } from "./github/pulls";
import { d1GitHubLedger } from "./github/usage-store";
import { linearProvider } from "./linear/provider";
import { listProjects, readProject, readWebhookProject } from "./projects";
import { checkHumanReadiness } from "./readiness";

// `any` as in AdmissionEnv: the store's project type has more fields than admission reads.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const REAL: AdmissionDeps<any, any> = {
  readProject,
  readWebhookProject,
  listProjects,
  provider: (project, secrets, config, env) =>
    project.tracker?.kind === "linear"
      ? linearProvider(project, secrets, config)
      : githubProvider(project, secrets, config, undefined, env ? d1GitHubLedger(env.DB, project, config) : null),
  publisher: (project, secrets, config, env) => githubPublisher(project, secrets, config, undefined, env ? d1GitHubLedger(env.DB, project, config) : null),
  rules: { parseAgentBrief, checkEligibility, checkHumanReadiness },
};

/** The set `env` brings (a test's), else the real one. */
export function admissionDeps(env: Env): AdmissionDeps {
  return (env as Env & AdmissionEnv).AUTOPILOT_ADMISSION ?? REAL;
}
