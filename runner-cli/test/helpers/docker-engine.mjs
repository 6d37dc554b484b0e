// A real Docker engine for the docker launcher's tests and bench row: scripts/docker-engine.sh
// starts it and builds the agent image (node and git from this machine; nothing is pulled), and a
// relay lets containers on the engine's bridge reach a Docket that listens on loopback only.
import { execFileSync, spawnSync } from 'node:child_process';
import { createConnection, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../../scripts/docker-engine.sh', import.meta.url));

/** The image scripts/docker-engine.sh builds. */
export const AGENT_IMAGE = 'docket-agent:local';

/**
 * The engine answering and the agent image present, or why not. Installs nothing: where dockerd is
 * missing or cannot start (no root), the caller skips (`.ci/run` installs and starts it).
 * @returns {{ ok: true } | { ok: false, why: string }}
 */
export function dockerEngine() {
  if (process.platform !== 'linux') return { ok: false, why: 'the docker tests run on Linux' };
  const r = spawnSync(SCRIPT, ['--no-install'], { encoding: 'utf8', timeout: 180_000, env: { ...process.env, DOCKET_DOCKER_IMAGE: AGENT_IMAGE } });
  if (r.status === 0) return { ok: true };
  const why = String(r.stderr || r.error?.message || 'no output').trim().split('\n').slice(-2).join(' / ');
  return { ok: false, why };
}

/** Runs the docker CLI and answers its trimmed stdout. @param {string[]} args */
export function docker(args) {
  return execFileSync('docker', args, { encoding: 'utf8', timeout: 30_000 }).trim();
}

/** One attempt's containers (or every attempt's of the run), as `<id> <state>` pairs. @param {string} runId */
export function containersOf(runId) {
  const out = docker(['ps', '--all', '--no-trunc', '--format', '{{.ID}} {{.State}}', '--filter', `label=docket.run_id=${runId}`]);
  return out ? out.split('\n').map((l) => { const [id, state] = l.split(' '); return { id, state }; }) : [];
}

/** How many containers the engine created for a run since `sinceMs` (its event log). @param {string} runId @param {number} sinceMs */
export function containersCreated(runId, sinceMs) {
  const out = docker(['events', '--since', String(Math.floor(sinceMs / 1000)), '--until', String(Math.ceil(Date.now() / 1000)),
    '--filter', 'type=container', '--filter', 'event=create', '--filter', `label=docket.run_id=${runId}`, '--format', '{{.ID}}']);
  return out ? out.split('\n').length : 0;
}

/**
 * A relay from the engine's bridge gateway to a server on loopback, on the same port: the docker
 * launcher points a container's daemon at host.docker.internal (the gateway) for a loopback server,
 * and the test's Docket listens on 127.0.0.1 only. Nothing leaves the machine.
 * @param {string} url the server's loopback URL
 */
export async function gatewayRelay(url) {
  // The engine names its gateway, or (as dockerd 20.10 does for its default bridge) leaves it at
  // the first address of the bridge's subnet.
  const [gw, subnet] = docker(['network', 'inspect', 'bridge', '--format', '{{range .IPAM.Config}}{{.Gateway}}|{{.Subnet}}{{end}}']).split('|');
  const gateway = gw || subnet?.replace(/\.0\/\d+$/, '.1');
  if (!gateway || !/^[0-9.]+$/.test(gateway)) throw new Error(`the engine's bridge has no IPv4 gateway (${gw} ${subnet})`);
  const port = Number(new URL(url).port);
  const sockets = new Set();
  const server = createServer((inbound) => {
    const outbound = createConnection({ host: '127.0.0.1', port });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { inbound.destroy(); outbound.destroy(); });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise((resolve, reject) => server.once('error', reject).listen(port, gateway, () => resolve(undefined)));
  return {
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve(undefined));
    }),
  };
}
