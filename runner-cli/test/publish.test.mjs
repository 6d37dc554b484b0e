// The runner's push of a publication (docs/protocol.md, "Publication") against a real local bare
// repository: the work committed as Docket, pushed to the run's branch, the pushed head reported,
// and the credential kept out of every file.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { credentialEnv, publish, publishPatch } from '../src/publish.ts';
import { git, repoWithCheckout } from './helpers/git-remote.mjs';

const dirs = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A bare repository with one commit on main, and a checkout of it as an attempt's work directory. */
function repoWithRoot() {
  const root = mkdtempSync(join(tmpdir(), 'docket-publish-'));
  dirs.push(root);
  return { root, ...repoWithCheckout(root) };
}

/** The Docket API as publish() calls it, recording each call. */
function fakeClient(bare, branch = 'docket/run_x') {
  const calls = [];
  return {
    calls,
    async pushCredential(runId, attempt) {
      calls.push(['push-credential', runId, attempt]);
      return { body: { token: 'ghs_very_secret', push_url: bare, branch, source_revision: null } };
    },
    async pushed(runId, attempt, body) {
      calls.push(['pushed', runId, attempt, body]);
      return { body: { state: 'publishing' } };
    },
  };
}

describe('the publication push', () => {
  it('commits the work as Docket, pushes HEAD to the run branch and reports the head the bare repository now has', async () => {
    const { root, bare, work, base } = repoWithRoot();
    writeFileSync(join(work, 'README.md'), 'commit\n');
    const client = fakeClient(bare);
    const r = await publish(client, { runId: 'run_x', attempt: 2, workDir: work, cloneDir: join(root, 'publish'), timeoutMs: 30_000 });
    const head = git(['--git-dir', bare, 'rev-parse', 'refs/heads/docket/run_x']);
    expect(r).toEqual({ branch: 'docket/run_x', headSha: head, state: 'publishing' });
    expect(client.calls).toEqual([['push-credential', 'run_x', 2], ['pushed', 'run_x', 2, { branch: 'docket/run_x', head_sha: head }]]);
    expect(git(['--git-dir', bare, 'log', '-1', '--format=%an|%P|%s', head])).toBe(`Docket|${base}|Docket run run_x`);
    expect(git(['--git-dir', bare, 'show', `${head}:README.md`])).toBe('commit');
    // main is untouched; the credential is in no file of the checkout.
    expect(git(['--git-dir', bare, 'rev-parse', 'refs/heads/main'])).toBe(base);
    expect(readFileSync(join(work, '.git', 'config'), 'utf8')).not.toContain('ghs_very_secret');
  });

  it("publishes the work the agent committed in its checkout as one Docket commit on the source revision, without files its .gitignore names", async () => {
    const { root, bare, work, base } = repoWithRoot();
    writeFileSync(join(work, 'README.md'), 'commit\n');
    writeFileSync(join(work, '.gitignore'), 'build/\n');
    git(['add', '-A'], work);
    git(['-c', 'user.name=Agent', '-c', 'user.email=agent@localhost', 'commit', '--quiet', '-m', 'the agent commits'], work);
    mkdirSync(join(work, 'build'));
    writeFileSync(join(work, 'build', 'out.js'), 'built\n');
    const r = await publish(fakeClient(bare), { runId: 'run_x', attempt: 1, workDir: work, cloneDir: join(root, 'publish'), timeoutMs: 30_000 });
    expect(git(['--git-dir', bare, 'log', '-1', '--format=%an|%P', r.headSha])).toBe(`Docket|${base}`);
    expect(git(['--git-dir', bare, 'ls-tree', '-r', '--name-only', r.headSha]).split('\n')).toEqual(['.gitignore', 'README.md']);
    expect(git(['--git-dir', bare, 'show', `${r.headSha}:README.md`])).toBe('commit');
    expect(existsSync(join(root, 'publish'))).toBe(false); // the clone is gone with the credential
  });

  it('a push-only job applies the stored patch at the source revision and pushes it, with no agent', async () => {
    const { root, bare, base } = repoWithRoot();
    const patch = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-comit\n+commit\n';
    const client = fakeClient(bare, 'docket/run_y');
    const r = await publishPatch(client, { runId: 'run_y', attempt: 3, cloneDir: join(root, 'push-only'), timeoutMs: 30_000, sourceRevision: base, patch });
    expect(git(['--git-dir', bare, 'rev-parse', 'refs/heads/docket/run_y'])).toBe(r.headSha);
    expect(git(['--git-dir', bare, 'show', `${r.headSha}:README.md`])).toBe('commit');
    expect(client.calls.at(-1)).toEqual(['pushed', 'run_y', 3, { branch: 'docket/run_y', head_sha: r.headSha }]);
  });

  it('the credential goes to git as a basic x-access-token header through the environment only', () => {
    const env = credentialEnv('ghs_abc');
    expect(env).toEqual({ GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: `Authorization: basic ${Buffer.from('x-access-token:ghs_abc').toString('base64')}` });
  });

  it("keeps git settings the runner was given through GIT_CONFIG_* (a mirror's insteadOf) and adds the header after them", () => {
    const env = credentialEnv('ghs_abc', { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'url./srv/git/app.git.insteadOf', GIT_CONFIG_VALUE_0: 'https://github.com/acme/app' });
    expect(env).toEqual({ GIT_CONFIG_COUNT: '2', GIT_CONFIG_KEY_1: 'http.extraHeader', GIT_CONFIG_VALUE_1: `Authorization: basic ${Buffer.from('x-access-token:ghs_abc').toString('base64')}` });
  });
});
