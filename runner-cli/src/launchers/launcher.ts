// The one interface every launcher serves (process, docker, e2b): launch a sandbox for a claim,
// and find it again after a restart. A job sees only this; a launcher's own settings (the docker
// binary, its image) are given to it where the launchers are made (index.ts), so adding a launcher
// is a module here and a row there, with no change to the job, the runner or the daemon.
import type { JobRow } from '../jobs.js';

/** A job's files (common.ts jobPaths has the layout). */
export type JobPaths = { jobDir: string; workDir: string; stateDir: string; logFile: string; publishDir: string };

export type ExitInfo = { code: number | null; signal: string | null };

/** A launched sandbox, running `docket-runner daemon -- <command>`, as the job supervises it. */
export interface Sandbox {
  id: string;
  pid: number | null;
  startTicks: string | null;
  running: () => boolean;
  /** Resolves once nothing of the sandbox runs any more. */
  exited: Promise<ExitInfo>;
  /** SIGTERM, grace, SIGKILL; keeps the files. */
  stop: (graceMs: number) => Promise<void>;
  /** Sends a signal to the daemon alone (SIGUSR1: checkpoint and pause); false when it is gone. */
  signal: (sig: NodeJS.Signals) => Promise<boolean>;
  /** Stop, then delete the work directory (the log stays for the retention period). */
  remove: (graceMs: number) => Promise<void>;
}

/** What a job asks of a launcher: the claim, where its files go, and the daemon's variables. */
export interface LaunchRequest {
  /** The claim answer (run_id, attempt, repository, launch). */
  claim: any;
  paths: JobPaths;
  /** DOCKET_URL, DOCKET_RUN_ID, DOCKET_ATTEMPT, DOCKET_ATTEMPT_TOKEN */
  docketEnv: Record<string, string>;
  passEnv: string[];
  checkoutTimeoutMs: number;
  handshakeTimeoutMs: number;
  /** The attempt's sandbox lifetime (the e2b launcher sets its sandbox's timeout from it). */
  lifetimeMs: number;
  /** Records a sandbox's id in the job database as soon as it exists, before the agent starts. */
  recordSandbox: (id: string) => void;
  signal?: AbortSignal;
}

export type Launcher = {
  protocol: string;
  launch: (req: LaunchRequest) => Promise<Sandbox>;
  /** The sandbox a job row recorded before a restart, or null when nothing of it runs any more. */
  adopt: (row: JobRow, paths: JobPaths) => Promise<Sandbox | null>;
  /**
   * After startup reconciliation: remove what runs for this machine but no job holds (`held`:
   * `<run id>#<attempt>` of every job not done). Throws LauncherRefused when the launcher's
   * provider refuses its credentials.
   */
  sweep?: (held: Set<string>) => Promise<void>;
};

/** The launcher's provider refused its credentials: no launch can succeed, so the runner stops. */
export class LauncherRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LauncherRefused';
  }
}
