// The real parts admission runs with (src/autopilot/deps.ts): the D1 project store with its
// encrypted secrets, the GitHub provider, and the pure brief, eligibility and readiness rules.
// The Worker's entry installs them once; tests may install in-memory ones instead.

import { parseAgentBrief } from "./brief";
import { installAdmissionDeps } from "./deps";
import { checkEligibility } from "./eligibility";
import { githubProvider } from "./github/provider";
import { githubPublisher } from "./github/pulls";
import { listProjects, readProject, readWebhookProject } from "./projects";
import { checkHumanReadiness } from "./readiness";

export function installRealAdmissionDeps(): void {
  installAdmissionDeps({
    readProject,
    readWebhookProject,
    listProjects,
    provider: githubProvider,
    publisher: githubPublisher,
    rules: { parseAgentBrief, checkEligibility, checkHumanReadiness },
  });
}
