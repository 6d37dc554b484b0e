// The runner's half of a publication (docs/protocol.md, "Publication"): after the sandbox ended and
// the final report left the run publishing, commit the work in the attempt's checkout as "Docket",
// push it to the run's branch with a short-lived credential that only this one git command sees,
// and report the pushed head. The credential is never written to disk, a log or the sandbox.
import { git } from './launchers/common.js';

/** What publish() needs of the API client (runner-cli/src/api.ts). */
export interface PublishClient {
  pushCredential(runId: string, attempt: number): Promise<{ body: { token: string; push_url: string; branch: string; source_revision: string | null } }>;
  pushed(runId: string, attempt: number, body: { branch: string; head_sha: string }): Promise<{ body: { state: string } }>;
}

export interface PublishJob {
  runId: string;
  attempt: number;
  /** The attempt's checkout (the sandbox's work directory). */
  workDir: string;
  timeoutMs: number;
}

const AUTHOR = ['-c', 'user.name=Docket', '-c', 'user.email=docket@localhost', '-c', 'commit.gpgsign=false'];

/**
 * Commits what the agent left in the checkout (nothing to commit is an error: a publication has a
 * non-empty patch), pushes HEAD to refs/heads/<branch> and reports it. Answers the run's state.
 */
export async function publish(client: PublishClient, job: PublishJob): Promise<{ branch: string; headSha: string; state: string }> {
  const opts = { cwd: job.workDir, timeoutMs: job.timeoutMs };
  await git(['add', '-A'], opts);
  const staged = (await git(['diff', '--cached', '--name-only'], opts)).trim();
  if (staged !== '') await git([...AUTHOR, 'commit', '--quiet', '--no-verify', '-m', `Docket run ${job.runId}`], opts);
  return pushAndReport(client, job);
}

/**
 * A push-only job (a publication continuation): the stored patch applied at the source revision in
 * a fresh checkout, committed and pushed; no agent runs.
 */
export async function publishPatch(client: PublishClient, job: PublishJob & { repositoryUrl: string; sourceRevision: string | null; patch: string }) {
  const opts = { cwd: job.workDir, timeoutMs: job.timeoutMs };
  await git(['clone', '--quiet', '--no-checkout', '--', job.repositoryUrl, job.workDir], { timeoutMs: job.timeoutMs });
  await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', job.sourceRevision || 'HEAD', '--'], opts);
  await gitWithInput(['apply', '--index', '--whitespace=nowarn', '-'], job.patch, opts);
  await git([...AUTHOR, 'commit', '--quiet', '--no-verify', '-m', `Docket run ${job.runId}`], opts);
  return pushAndReport(client, job);
}

async function pushAndReport(client: PublishClient, job: PublishJob) {
  const opts = { cwd: job.workDir, timeoutMs: job.timeoutMs };
  const headSha = (await git(['rev-parse', 'HEAD'], opts)).trim();
  const credential = (await client.pushCredential(job.runId, job.attempt)).body;
  // The branch is the run's own (docket/<run id>): a retry after a lost answer may replace it.
  await git(['push', '--quiet', '--force', credential.push_url, `HEAD:refs/heads/${credential.branch}`], { ...opts, env: credentialEnv(credential.token, process.env) });
  const answer = await client.pushed(job.runId, job.attempt, { branch: credential.branch, head_sha: headSha });
  return { branch: credential.branch, headSha, state: answer.body.state };
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

function gitWithInput(args: string[], input: string, opts: { cwd: string; timeoutMs: number }) {
  return git(args, { ...opts, input });
}
