// Launchers by protocol name, each behind the Launcher interface (launcher.ts) with its own
// settings from the runner's configuration. Each is loaded on its first use, so an idle `listen`
// does not carry them (docs/BENCHMARKS.md, "Idle runner memory").
import type { Launcher } from './launcher.js';

/** The configuration the launchers take their settings from (config.ts OPTIONS). */
export type LauncherConfig = {
  docker_path: string; docker_image: string; docker_network?: string | null;
  e2b_api_key?: string | null; e2b_template: string; e2b_api_url?: string | null; e2b_sandbox_url?: string | null; machine_id?: string | null;
};

export function launchers(cfg: LauncherConfig): Record<string, Launcher> {
  const docker = { dockerPath: cfg.docker_path, image: cfg.docker_image, network: cfg.docker_network };
  const e2b = { apiKey: cfg.e2b_api_key ?? null, template: cfg.e2b_template, apiUrl: cfg.e2b_api_url, sandboxUrl: cfg.e2b_sandbox_url, machineId: cfg.machine_id ?? null };
  return {
    process: {
      protocol: 'process',
      launch: async (req) => (await import('./process.js')).launchProcess(req),
      adopt: async (row, paths) => (await import('./process.js')).adoptProcess(row, paths),
    },
    docker: {
      protocol: 'docker',
      launch: async (req) => (await import('./docker.js')).launchDocker(req, docker),
      adopt: async (row, paths) => (await import('./docker.js')).adoptDocker(row, paths, docker.dockerPath),
    },
    e2b: {
      protocol: 'e2b',
      launch: async (req) => (await import('./e2b.js')).launchE2b(req, e2b),
      adopt: async (row, paths) => (await import('./e2b.js')).adoptE2b(row, paths, e2b),
      sweep: async (held) => (await import('./e2b.js')).sweepE2b(held, e2b),
    },
  };
}
