// What a hostile agent can plant in its checkout (or, with the `process` launcher, in the HOME it
// shares with the runner) to run a command on the runner's host or to redirect the publication's
// push. Each plant only writes files, as an agent would, and each command it plants writes a marker
// file (its environment, so a leaked push credential would show there) into `markers`.
// Used by the agent scripts of the tests too, so it imports nothing but node.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * @typedef {{ work: string, root: string, markers: string, bare: string, evil: string, home: string }} PlantSite
 * work: the agent's checkout; root: a directory outside it; bare: the URL Docket gives to push to;
 * evil: where a planted rewrite would send the push; home: the HOME the agent shares with the runner.
 */

/** A shell script at `path` that records that it ran under `name`; a filter's passes its stdin through. */
function plantedCommand(site, path, name, { filter = false } = {}) {
  writeFileSync(path, `#!/bin/sh\nenv > '${join(site.markers, name)}'\n${filter ? 'exec cat' : 'exit 0'}\n`, { mode: 0o755 });
  return path;
}

/** A hook in the checkout's own hooks directory. */
function hook(site, name) {
  mkdirSync(join(site.work, '.git', 'hooks'), { recursive: true });
  return plantedCommand(site, join(site.work, '.git', 'hooks', name), name);
}

const command = (site, name) => plantedCommand(site, join(site.root, `planted-${name}.sh`), name);
const config = (site, text) => appendFileSync(join(site.work, '.git', 'config'), text);

/** @type {Record<string, (site: PlantSite) => void>} */
export const PLANTS = {
  'core.fsmonitor': (site) => config(site, `[core]\n\tfsmonitor = ${command(site, 'fsmonitor')}\n`),
  'core.hooksPath': (site) => {
    const dir = join(site.root, 'planted-hooks');
    mkdirSync(dir, { recursive: true });
    for (const hook of ['pre-commit', 'post-commit', 'pre-push', 'post-checkout', 'reference-transaction']) plantedCommand(site, join(dir, hook), `hooksPath-${hook}`);
    config(site, `[core]\n\thooksPath = ${dir}\n`);
  },
  'a pre-push hook': (site) => hook(site, 'pre-push'),
  'a post-commit hook': (site) => hook(site, 'post-commit'),
  'url.<x>.insteadOf': (site) => config(site, `[url "${site.evil}"]\n\tinsteadOf = ${site.bare}\n`),
  'url.<x>.pushInsteadOf': (site) => config(site, `[url "${site.evil}"]\n\tpushInsteadOf = ${site.bare}\n`),
  'an includeIf file': (site) => {
    const included = join(site.root, 'planted-include.config');
    writeFileSync(included, `[core]\n\tfsmonitor = ${command(site, 'includeIf-fsmonitor')}\n[url "${site.evil}"]\n\tpushInsteadOf = ${site.bare}\n`);
    config(site, `[includeIf "gitdir:${site.work}/"]\n\tpath = ${included}\n`);
  },
  'a clean filter named in .gitattributes': (site) => {
    writeFileSync(join(site.work, '.gitattributes'), '* filter=planted\n');
    const filter = plantedCommand(site, join(site.root, 'planted-filter.sh'), 'filter', { filter: true });
    config(site, `[filter "planted"]\n\tclean = ${filter}\n`);
  },
  '~/.gitconfig': (site) => writeFileSync(join(site.home, '.gitconfig'), `[core]\n\tfsmonitor = ${command(site, 'global-fsmonitor')}\n[url "${site.evil}"]\n\tpushInsteadOf = ${site.bare}\n`),
};
