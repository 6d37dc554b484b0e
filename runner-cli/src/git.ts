// The one way the runner and its daemon run git (runner-cli/README.md, "The sandbox boundary").
// A checkout the agent had is input from a stranger: git must never execute through it. So no
// git run here reads a system or global config file (with the `process` launcher the agent shares
// the runner's HOME and could write ~/.gitconfig), none runs a hook or an fsmonitor whatever a
// config file says, and none uses the agent's own repository as its git directory: patch.ts reads
// the agent's work tree through a git directory of its own, publish.ts pushes from a fresh clone.
// Settings the operator gives the runner through GIT_CONFIG_COUNT/KEY/VALUE (a mirror's insteadOf)
// come from the runner's own environment, which the agent cannot change, and are kept.
import { execFile } from 'node:child_process';

/** A git command that failed: which one, and the last lines it printed. */
export class GitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GitError';
  }
}

/**
 * Command-line settings win over every config file, the repository's own included (and whatever
 * it includes through include/includeIf): no hook, no fsmonitor, no `ext::` transport that runs a
 * command named in a URL.
 */
const HARDENED_ARGS = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'protocol.ext.allow=never'];

/**
 * Variables that would point git at another repository, index or object store: only a caller's
 * own (a scratch index, borrowed objects) count, never ones the runner happened to inherit.
 */
const LOCATION_ENV = ['GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES', 'GIT_COMMON_DIR', 'GIT_NAMESPACE', 'GIT_CONFIG', 'GIT_CONFIG_SYSTEM'];

/** The environment of a hardened git: the runner's own, no system or global config, no prompt. */
function gitEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of LOCATION_ENV) delete env[name];
  return { ...env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: 'true', ...extra };
}

type GitOptions = { cwd?: string; timeoutMs: number; signal?: AbortSignal; env?: Record<string, string> };

/**
 * Runs `git <HARDENED_ARGS> <args>`. `env` adds to gitEnv() (a scratch GIT_INDEX_FILE, the push
 * credential). Large output goes to a file (`diff --output`), not through stdout.
 * @returns stdout
 */
export function git(args: string[], { cwd, timeoutMs, signal, env }: GitOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', [...HARDENED_ARGS, ...args], { cwd, timeout: timeoutMs, signal, maxBuffer: 16 * 1024 * 1024, env: gitEnv(env) }, (err, stdout, stderr) => {
      if (err) {
        const why = String(stderr || err.message).trim().split('\n').slice(-3).join(' / ');
        reject(new GitError(`git ${subcommand(args)} failed: ${why}`));
      } else resolve(stdout);
    });
  });
}

/** The command a git argv runs, past its global options (`-c k=v`, `--git-dir <dir>`). */
function subcommand(args: string[]) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '-c' || args[i] === '--git-dir' || args[i] === '--work-tree') i++;
    else if (!args[i].startsWith('-')) return args[i];
  }
  return args[0];
}
