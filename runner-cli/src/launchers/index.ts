// Launchers by protocol name. Each launches a sandbox for a claim and finds one again after a restart.
import { adoptDocker, launchDocker } from './docker.js';
import { adoptProcess, launchProcess, type Sandbox } from './process.js';
import type { JobRow } from '../jobs.js';
import type { JobPaths, LaunchRequest } from './common.js';

export type Launcher = {
  protocol: string;
  launch: (req: LaunchRequest) => Promise<Sandbox>;
  adopt: (row: JobRow, paths: JobPaths) => Promise<Sandbox | null>;
};

export function launchers(cfg: { docker_path: string }): Record<string, Launcher> {
  return {
    process: { protocol: 'process', launch: launchProcess, adopt: async (row, paths) => adoptProcess(row, paths) },
    docker: { protocol: 'docker', launch: launchDocker, adopt: (row, paths) => adoptDocker(row, paths, cfg.docker_path) },
  };
}
