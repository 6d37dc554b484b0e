// A local bare repository standing in for the remote a run is pushed to, and an attempt's checkout
// of it, for the tests of the patch and the publication.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** git as the tests run it: no system or global config of the machine running them. */
export const git = (args, cwd) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' } }).trim();

/** A bare repository under `root` with one commit on main (README.md "comit"), and a checkout of it as an attempt's work directory. */
export function repoWithCheckout(root) {
  const bare = join(root, 'remote.git');
  git(['init', '--quiet', '--bare', '--initial-branch=main', bare]);
  const seed = join(root, 'seed');
  git(['clone', '--quiet', bare, seed]);
  writeFileSync(join(seed, 'README.md'), 'comit\n');
  git(['add', 'README.md'], seed);
  git(['-c', 'user.name=Seed', '-c', 'user.email=seed@localhost', 'commit', '--quiet', '-m', 'seed'], seed);
  git(['push', '--quiet', 'origin', 'HEAD:refs/heads/main'], seed);
  const base = git(['rev-parse', 'HEAD'], seed);
  const work = join(root, 'work');
  git(['clone', '--quiet', bare, work]);
  return { bare, work, base };
}
