// The e2b relay: the agent command of an e2b attempt's daemon, run on the runner's machine with
// the daemon's work directory (the runner's own checkout) as its own. It drives the agent's command
// in the E2B sandbox through the SDK: the output streams back as its own, a stop (SIGTERM) kills the
// command, a pause (SIGUSR1) is passed on to it. When the agent ends, its result and checkpoint
// files and its work come out as bytes: the work is a patch the sandbox's git made, which is the
// agent's own output, so it is applied to the runner's checkout (reset to the source revision first)
// by the hardened git of git.ts, as a stranger's patch; the daemon then reads the patch from there
// as it does in every sandbox. Usage: node e2b-relay.js <e2b-relay.json>.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Sandbox as E2bSandbox } from 'e2b';
import { git } from '../git.js';
import { connection, shellQuote } from './e2b.js';

/** The most of one file taken out of the sandbox (the patch, a result, a checkpoint). */
const MAX_TAKEN_BYTES = 64 * 1024 * 1024;
const GIT_TIMEOUT_MS = 120_000;
/** The relay's own failure, told apart from the agent's exit codes. */
const RELAY_FAILED = 125;

type Relay = {
  sandbox_id: string; work_dir: string; state_dir: string; command: string[]; envs: Record<string, string>;
  source_revision: string | null; api_url: string | null; sandbox_url: string | null;
};

async function relay(file: string): Promise<number> {
  const r: Relay = JSON.parse(readFileSync(file, 'utf8'));
  const { Sandbox: Sdk } = await import('e2b');
  const sbx = await Sdk.connect(r.sandbox_id, connection({ apiKey: process.env.DOCKET_E2B_API_KEY ?? null, apiUrl: r.api_url, sandboxUrl: r.sandbox_url }));
  const handle = await sbx.commands.run(`exec ${r.command.map(shellQuote).join(' ')}`, {
    background: true, cwd: r.work_dir, envs: r.envs, timeoutMs: 0,
    onStdout: (d) => void process.stdout.write(d), onStderr: (d) => void process.stderr.write(d),
  });
  let stopped = false;
  const stop = () => {
    stopped = true;
    void handle.kill().catch(() => false);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGUSR1', () => void sbx.commands.run(`kill -USR1 ${handle.pid}`).catch(() => undefined));
  const code = await handle.wait().then((res) => res.exitCode, (e) => (typeof e?.exitCode === 'number' ? e.exitCode : RELAY_FAILED));
  if (stopped) return 143;
  await takeWorkOut(sbx, r, dirname(file));
  return code;
}

/** The agent's result and checkpoint files to where the daemon reads them, and its work to the runner's checkout. */
async function takeWorkOut(sbx: E2bSandbox, r: Relay, hostStateDir: string) {
  for (const [name, hostPath] of [['result.json', process.env.DOCKET_RESULT_FILE], ['checkpoint.json', process.env.DOCKET_CHECKPOINT_FILE]]) {
    const bytes = hostPath ? await readOut(sbx, `${r.state_dir}/${name}`) : null;
    if (bytes && hostPath) writeFileSync(hostPath, bytes, { mode: 0o600 });
  }
  if (!r.source_revision) return;
  const work = shellQuote(r.work_dir);
  const out = shellQuote(`${r.state_dir}/work.patch`);
  // Ignored files too, as the daemon's own patch takes them; the plain rule when that fails.
  const diff = `cd ${work} && { git add --all --force . || git add --all .; } && git -c core.quotepath=off diff --cached --binary --no-color --no-ext-diff ${shellQuote(r.source_revision)} > ${out}`;
  const made = await sbx.commands.run(diff, { timeoutMs: GIT_TIMEOUT_MS }).then(() => true, (e) => {
    process.stderr.write(`docket-runner e2b relay: the sandbox could not make the patch: ${e?.message ?? e}\n`);
    return false;
  });
  const patch = made ? await readOut(sbx, `${r.state_dir}/work.patch`) : null;
  const opts = { cwd: process.cwd(), timeoutMs: GIT_TIMEOUT_MS };
  await git(['reset', '--quiet', '--hard', r.source_revision], opts);
  await git(['clean', '-ffdxq'], opts);
  if (!patch || patch.length === 0) return;
  const patchFile = join(hostStateDir, 'sandbox.patch');
  writeFileSync(patchFile, patch, { mode: 0o600 });
  await git(['apply', '--binary', '--whitespace=nowarn', patchFile], opts);
}

/** A file of the sandbox as bytes, or null when it is missing or over MAX_TAKEN_BYTES. */
async function readOut(sbx: E2bSandbox, path: string): Promise<Uint8Array | null> {
  try {
    const bytes = await sbx.files.read(path, { format: 'bytes' });
    if (bytes.length <= MAX_TAKEN_BYTES) return bytes;
    process.stderr.write(`docket-runner e2b relay: ${path} is over ${MAX_TAKEN_BYTES} bytes and was left in the sandbox\n`);
    return null;
  } catch {
    return null;
  }
}

relay(process.argv[2]).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`docket-runner e2b relay: ${e?.message ?? e}\n`);
    process.exit(RELAY_FAILED);
  },
);
