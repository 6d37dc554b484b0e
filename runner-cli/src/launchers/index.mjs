// Launchers by protocol name. Each launches a sandbox for a claim and finds one again after a restart.
import { adoptDocker, launchDocker } from './docker.mjs';
import { adoptProcess, launchProcess } from './process.mjs';

/**
 * @typedef {{ protocol: string,
 *   launch: (req: import('./common.mjs').LaunchRequest) => Promise<import('./process.mjs').Sandbox>,
 *   adopt: (row: any, paths: ReturnType<import('./common.mjs').jobPaths>) => Promise<import('./process.mjs').Sandbox | null> }} Launcher
 */

/** @param {{ docker_path: string }} cfg @returns {Record<string, Launcher>} */
export function launchers(cfg) {
  return {
    process: { protocol: 'process', launch: launchProcess, adopt: async (row, paths) => adoptProcess(row, paths) },
    docker: { protocol: 'docker', launch: launchDocker, adopt: (row, paths) => adoptDocker(row, paths, cfg.docker_path) },
  };
}
