// The runner loads the contract's zod schemas on first use; the heartbeat answer, the one answer an
// idle runner decodes, is first checked without zod (heartbeatFits). That check must never accept
// an answer the contract's HeartbeatAnswer refuses, and must accept the server's real answers.
import { describe, expect, it } from 'vitest';
import { HeartbeatAnswer } from '../../src/protocol/runners.ts';
import { heartbeatFits } from '../src/api.ts';
import { heartbeatAnswer, runnerConfig } from './helpers/answers.mjs';

const good = heartbeatAnswer();
const variants = [
  good,
  { ...good, extra: 1 },
  { ...good, config: { ...runnerConfig, lease_wait_max_ms: 20_000 } },
  { ...good, machine_id: 'mch_1' },
  { ...good, machine_id: 'MCH_00000000000000000000000A' },
  { ...good, machine_id: undefined },
  { ...good, server_time_ms: 1.5 },
  { ...good, server_time_ms: '1' },
  { ...good, config: null },
  { ...good, config: undefined },
  ...Object.keys(runnerConfig).flatMap((k) => [
    { ...good, config: { ...runnerConfig, [k]: undefined } },
    { ...good, config: { ...runnerConfig, [k]: '5' } },
    { ...good, config: { ...runnerConfig, [k]: 2.5 } },
    { ...good, config: { ...runnerConfig, [k]: [1] } },
  ]),
  { ...good, config: { ...runnerConfig, protocols: ['process', 1] } },
  null,
  [],
  'ok',
];

describe('heartbeatFits', () => {
  it('accepts the answers the contract accepts that a server sends, and nothing the contract refuses', () => {
    expect(heartbeatFits(good)).toBe(true);
    for (const v of variants) {
      if (heartbeatFits(v)) expect(HeartbeatAnswer.safeParse(v).success, JSON.stringify(v)).toBe(true);
    }
    // The check is not vacuous: it refuses most of the broken answers.
    expect(variants.filter((v) => !heartbeatFits(v)).length).toBeGreaterThan(20);
  });
});
