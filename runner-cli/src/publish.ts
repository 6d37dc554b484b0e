// The runner's half of a publication (docs/protocol.md, "Publication"). After the sandbox ended and
// the final report left the run publishing, the work is read out of the attempt's checkout as a
// patch; a push-only job has its stored patch. Either is applied to a fresh clone of the URL Docket
// gave, in a directory the sandbox never saw, committed as "Docket" and pushed to the run's branch,
// and the pushed head is reported. Nothing runs through the agent's checkout (runner-cli/README.md,
// "The sandbox boundary"): its config, hooks and remotes are never read, so a hook it planted
// cannot run and an insteadOf it planted cannot send the push elsewhere. The short-lived
// credential reaches only the clone and the push, through their environment: never a file, a log,
// the command line or the sandbox.
import { rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { git } from './git.js';
import { diffWorkTree } from './patch.js';

/** What publish() needs of the API client (runner-cli/src/api.ts). */
export interface PublishClient {
  pushCredential(runId: string, attempt: number): Promise<{ body: PushCredential }>;
  pushed(runId: string, attempt: number, body: { branch: string; head_sha: string }): Promise<{ body: { state: string } }>;
}

type PushCredential = { token: string; push_url: string; branch: string; source_revision: string | null };

export interface PublishJob {
  runId: string;
  attempt: number;
  /** Where the fresh clone is made: the runner's, never mounted into a sandbox; removed after. */
  cloneDir: string;
  timeoutMs: number;
}

const AUTHOR = ['-c', 'user.name=Docket', '-c', 'user.email=docket@localhost', '-c', 'commit.gpgsign=false'];

/**
 * Publishes what the agent left in its checkout `workDir` (files its .gitignore names stay out, as
 * they would of a commit there): its work tree against the source revision, read through the
 * fresh clone's git directory. Answers the run's state.
 */
export async function publish(client: PublishClient, job: PublishJob & { workDir: string }): Promise<{ branch: string; headSha: string; state: string }> {
  return publishFrom(client, job, null, (revision, output) =>
    diffWorkTree({ gitDir: join(job.cloneDir, '.git'), workTree: job.workDir, index: join(job.cloneDir, '.git', 'docket-work.index'), revision, output, includeIgnored: false, timeoutMs: job.timeoutMs }));
}

/** A push-only job (a publication continuation): the stored patch at its source revision; no agent runs. */
export async function publishPatch(client: PublishClient, job: PublishJob & { sourceRevision: string | null; patch: string }) {
  return publishFrom(client, job, job.sourceRevision, async (_revision, output) => writeFileSync(output, job.patch));
}

/**
 * The one way a publication is made: the credential, a fresh clone of its push_url at the source
 * revision (the job's, else the credential's, else the default branch), the patch `writePatch`
 * puts in a file applied and committed, `HEAD:refs/heads/<branch>` pushed and reported.
 */
async function publishFrom(client: PublishClient, job: PublishJob, revision: string | null, writePatch: (revision: string, output: string) => Promise<void>) {
  const credential = (await client.pushCredential(job.runId, job.attempt)).body;
  const auth = credentialEnv(credential.token, process.env);
  let headSha: string;
  try {
    const at = await freshClone(credential.push_url, job, revision ?? credential.source_revision ?? 'HEAD', auth);
    const patchFile = join(job.cloneDir, '.git', 'docket-work.patch');
    await writePatch(at, patchFile);
    headSha = await commitPatch(job, patchFile, at);
    // The branch is the run's own (docket/<run id>): a retry after a lost answer may replace it.
    await git(['push', '--quiet', '--force', credential.push_url, `HEAD:refs/heads/${credential.branch}`], { cwd: job.cloneDir, timeoutMs: job.timeoutMs, env: auth });
  } finally {
    rmSync(job.cloneDir, { recursive: true, force: true });
  }
  const answer = await client.pushed(job.runId, job.attempt, { branch: credential.branch, head_sha: headSha });
  return { branch: credential.branch, headSha, state: answer.body.state };
}

/** Clones `url` into the job's clone directory and checks out `revision`; answers the commit. */
async function freshClone(url: string, job: PublishJob, revision: string, auth: Record<string, string>) {
  rmSync(job.cloneDir, { recursive: true, force: true });
  await git(['clone', '--quiet', '--no-checkout', '--', url, job.cloneDir], { timeoutMs: job.timeoutMs, env: auth });
  const opts = { cwd: job.cloneDir, timeoutMs: job.timeoutMs };
  await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', revision, '--'], opts);
  return (await git(['rev-parse', 'HEAD'], opts)).trim();
}

/** Applies the patch file on `revision` and commits it as Docket; answers the new commit. */
async function commitPatch(job: PublishJob, patchFile: string, revision: string) {
  if (statSync(patchFile).size === 0) throw new Error(`nothing to publish: the work has no change against ${revision}`);
  const opts = { cwd: job.cloneDir, timeoutMs: job.timeoutMs };
  await git(['apply', '--index', '--whitespace=nowarn', patchFile], opts);
  await git([...AUTHOR, 'commit', '--quiet', '--no-verify', '-m', `Docket run ${job.runId}`], opts);
  return (await git(['rev-parse', 'HEAD'], opts)).trim();
}

/**
 * The token as an `http.extraHeader` for one git command, through git's GIT_CONFIG_* variables so
 * it is in neither the command line (visible to every user) nor any config file. A file:// or local
 * path remote ignores it. Settings the runner's own environment already passes this way (an
 * `insteadOf` for a mirror, say) are kept: the header is added after them.
 */
export function credentialEnv(token: string, env: Record<string, string | undefined> = {}): Record<string, string> {
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  const count = Number(env.GIT_CONFIG_COUNT);
  const n = Number.isSafeInteger(count) && count > 0 ? count : 0;
  return { GIT_CONFIG_COUNT: String(n + 1), [`GIT_CONFIG_KEY_${n}`]: 'http.extraHeader', [`GIT_CONFIG_VALUE_${n}`]: `Authorization: basic ${basic}` };
}
