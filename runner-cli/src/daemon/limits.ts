// The daemon's limits and exit codes: every timing and bound of the in-sandbox daemon, each
// overridable through the environment for tests and odd agents (runner-cli/README.md, "The agent's side").

/** Daemon exit codes. */
export const DAEMON_EXIT = { delivered: 0, undelivered: 1, usage: 2, attemptOver: 3, paused: 4, stopped: 143 };

/**
 * Limits, each overridable through the environment (DOCKET_DAEMON_*), for tests and odd agents:
 * the variable, its default and what it bounds (`docket-runner daemon --help` lists them).
 */
const DAEMON_LIMITS = {
  flushIntervalMs: { env: 'DOCKET_DAEMON_FLUSH_MS', default: 1_000, help: 'how often buffered output is sent' },
  heartbeatMs: { env: 'DOCKET_DAEMON_HEARTBEAT_MS', default: 30_000, help: 'a report at least this often while the agent is silent' },
  maxBatchLines: { env: 'DOCKET_DAEMON_BATCH_LINES', default: 200, help: 'output lines per report' },
  maxLineChars: { env: 'DOCKET_DAEMON_LINE_CHARS', default: 4_000, help: 'a longer output line is cut' },
  maxBufferedLines: { env: 'DOCKET_DAEMON_BUFFER_LINES', default: 10_000, help: 'lines kept while the server is away; older ones are dropped with a note' },
  // The server takes up to 5,000,000 characters.
  maxPatchBytes: { env: 'DOCKET_DAEMON_MAX_PATCH_BYTES', default: 4_900_000, help: 'a larger patch is left out of the final report, saying so' },
  finalTries: { env: 'DOCKET_DAEMON_FINAL_TRIES', default: 8, help: 'tries of the final report and of the checkpoint' },
  stopGraceMs: { env: 'DOCKET_DAEMON_STOP_GRACE_MS', default: 10_000, help: "SIGTERM to SIGKILL when stopping the agent's process group" },
  checkpointGraceMs: { env: 'DOCKET_DAEMON_CHECKPOINT_GRACE_MS', default: 60_000, help: 'time an agent asked to checkpoint (SIGUSR1) gets to write it and exit' },
  // See superviseAgent.
  stopSignalWaitMs: { env: 'DOCKET_DAEMON_STOP_SIGNAL_WAIT_MS', default: 1_000, help: "how long an agent that died of a signal waits for the daemon's own stop signal" },
  backoffBaseMs: { env: 'DOCKET_DAEMON_BACKOFF_BASE_MS', default: 1_000, help: 'first retry delay of a report (doubles, with jitter)' },
  backoffMaxMs: { env: 'DOCKET_DAEMON_BACKOFF_MAX_MS', default: 15_000, help: 'longest retry delay of a report' },
} as const;

/** The limits from the environment; a value that is not a positive integer keeps its default. */
export function daemonLimits(env: Record<string, string | undefined>) {
  const limits = {} as { -readonly [K in keyof typeof DAEMON_LIMITS]: number };
  for (const [key, spec] of Object.entries(DAEMON_LIMITS) as [keyof typeof DAEMON_LIMITS, (typeof DAEMON_LIMITS)[keyof typeof DAEMON_LIMITS]][]) {
    const n = Number(env[spec.env]);
    limits[key] = Number.isSafeInteger(n) && n > 0 ? n : spec.default;
  }
  return limits;
}

/** Help lines for the DOCKET_DAEMON_* variables, with their defaults. */
export function daemonLimitsHelp() {
  return Object.values(DAEMON_LIMITS).map((s) => `  ${s.env.padEnd(36)} ${s.help}; default ${s.default}`).join('\n');
}

export type DaemonLimits = ReturnType<typeof daemonLimits>;
