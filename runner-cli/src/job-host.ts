// What a job needs from the runner that holds it: the configuration, the job database, the output,
// the machine's client and launchers, the server's timings, and the runner's stop. runner.ts
// implements it and job.ts uses it, so imports go one way: the runner to its jobs.
import type { RunnerConfig } from '../../src/protocol/index.js';
import type { DocketClient } from './api.js';
import type { Backoff } from './backoff.js';
import type { JobDb } from './jobs.js';
import type { Launcher } from './launchers/launcher.js';
import type { Output } from './output.js';

export interface JobHost {
  cfg: Record<string, any>;
  db: JobDb;
  out: Output;
  client: DocketClient;
  launchers: Record<string, Launcher>;
  /** The server's runner configuration, from its last registration or heartbeat answer. */
  serverConfig: Partial<RunnerConfig>;
  readonly stopping: boolean;
  readonly stopSignal: AbortSignal;
  /** The server answered 426: the runner says how to upgrade and stops. */
  upgradeRequired(err: unknown): void;
  /** A launcher's provider refused its credentials: the runner says so and stops. */
  launcherRefused(message: string): void;
  /** The retry backoff of the runner's configuration (backoff_base_ms, backoff_max_ms). */
  backoff(): Backoff;
}
