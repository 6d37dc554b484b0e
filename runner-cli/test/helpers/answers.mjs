// Answers a fake server gives, complete by the contract (src/protocol/runners.ts): the runner
// decodes every answer, so a fake answer missing a field is refused like a real one would be.

/** A machine id and run ids in the server's format (<prefix>_<24 hex digits>). */
export const MACHINE_ID = 'mch_00000000000000000000000a';
export const RUN_ID = 'run_0000000000000000000000a1';

export const runnerConfig = {
  lease_ttl_ms: 5000,
  lease_refresh_ms: 300,
  heartbeat_interval_ms: 60_000,
  claim_wait_ms: 200,
  sandbox_lifetime_ms: 600_000,
  min_cli_version: '0.0.0',
  protocols: ['process', 'docker'],
};

/** The body of a heartbeat's 200. */
export const heartbeatAnswer = (config = runnerConfig) => ({ machine_id: MACHINE_ID, server_time_ms: Date.now(), config });

/** The body of an attempt call's or a report's 200. */
export const attemptAnswerBody = (over = {}) => ({
  run_id: RUN_ID, attempt: 1, state: 'implementing', lease_expires_at_ms: Date.now() + 5000, stop_requested: false, ...over,
});
