// Launchers by protocol name. Each launches a sandbox for a claim and finds one again after a restart.
// Each is loaded on its first use, so an idle `listen` does not carry them (docs/BENCHMARKS.md, "Idle runner memory").
import type { Sandbox } from './process.js';
import type { JobRow } from '../jobs.js';
import type { JobPaths, LaunchRequest } from './common.js';

export type Launcher = {
  protocol: string;
  launch: (req: LaunchRequest) => Promise<Sandbox>;
  adopt: (row: JobRow, paths: JobPaths) => Promise<Sandbox | null>;
};

export function launchers(cfg: { docker_path: string }): Record<string, Launcher> {
  return {
    process: {
      protocol: 'process',
      launch: async (req) => (await import('./process.js')).launchProcess(req),
      adopt: async (row, paths) => (await import('./process.js')).adoptProcess(row, paths),
    },
    docker: {
      protocol: 'docker',
      launch: async (req) => (await import('./docker.js')).launchDocker(req),
      adopt: async (row, paths) => (await import('./docker.js')).adoptDocker(row, paths, cfg.docker_path),
    },
  };
}
