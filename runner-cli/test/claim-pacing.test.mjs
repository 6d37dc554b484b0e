// The claim loop never spins: claims start at least --claim-min-gap-ms apart, however fast the
// server answers, and a 429 or 503 with Retry-After (too_many_waiters, rate_limited, recovering) is waited out.
import { afterEach, describe, expect, it } from 'vitest';
import { parseRetryAfter, RETRY_AFTER_MAX_MS } from '../src/api.ts';
import { heartbeatAnswer } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';

const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** Start listen --json against `url`, registered by a hand-written config file. */
function listen(url, args = []) {
  return spawnListen(configuredHome(url, 'docket-pacing-', cleanups), args, cleanups);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const heartbeat = { status: 200, body: heartbeatAnswer() };
const claimTimes = (server) => server.requests.filter((r) => r.path === '/v1/runners/claim').map((r) => r.at_ms);

describe('claim pacing', () => {
  it('a server that answers 204 at once gets at most one claim per --claim-min-gap-ms, not a tight loop', async () => {
    const server = await fakeServer(({ path }) => (path === '/v1/runners/heartbeat' ? heartbeat : { status: 204 }));
    cleanups.push(server.close);
    const l = listen(server.url, ['--claim-min-gap-ms', '500']);
    await l.waitFor('started');
    await sleep(3_000);
    const times = claimTimes(server);
    // 3 s at one claim per 500 ms is about 6; an unpaced loop sends hundreds.
    expect(times.length).toBeGreaterThanOrEqual(3);
    expect(times.length).toBeLessThanOrEqual(8);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(400);
    expect((await l.kill('SIGTERM')).code).toBe(0);
  });

  it('the default gap is one second', async () => {
    const server = await fakeServer(({ path }) => (path === '/v1/runners/heartbeat' ? heartbeat : { status: 204 }));
    cleanups.push(server.close);
    const l = listen(server.url);
    await l.waitFor('started');
    await sleep(2_500);
    const times = claimTimes(server);
    expect(times.length).toBeGreaterThanOrEqual(2);
    expect(times.length).toBeLessThanOrEqual(4);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(850);
  });

  for (const [status, code] of [[429, 'too_many_waiters'], [429, 'rate_limited'], [503, 'recovering']]) {
    it(`a ${status} ${code} with Retry-After: 2 is waited out before the next claim, longer than the backoff`, async () => {
      let claims = 0;
      const server = await fakeServer(({ path }) => {
        if (path === '/v1/runners/heartbeat') return heartbeat;
        claims += 1;
        if (claims === 1) return { status, headers: { 'retry-after': '2' }, body: { error: { code, message: 'try again later', retry_after_ms: 2000 } } };
        return { status: 204 };
      });
      cleanups.push(server.close);
      const l = listen(server.url, ['--claim-min-gap-ms', '0']);
      const failed = await l.waitFor('claim_failed');
      expect(failed).toMatchObject({ status, code, retry_after_ms: 2000, retry_in_ms: 2000 });
      expect(failed.message).toContain('; trying again in 2.0 s');
      await sleep(2_600);
      const times = claimTimes(server);
      expect(times.length).toBeGreaterThanOrEqual(2);
      // The backoff alone would retry within 100 ms.
      expect(times[1] - times[0]).toBeGreaterThanOrEqual(1_850);
    });
  }

  it('a Retry-After on a failed heartbeat holds the first heartbeat back as long', async () => {
    let beats = 0;
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') {
        beats += 1;
        if (beats === 1) return { status: 429, headers: { 'retry-after': '2' }, body: { error: { code: 'rate_limited', message: 'slow down', retry_after_ms: 2000 } } };
        return heartbeat;
      }
      return { status: 204 };
    });
    cleanups.push(server.close);
    const l = listen(server.url);
    const failed = await l.waitFor('heartbeat_failed');
    expect(failed).toMatchObject({ status: 429, failures: 1, retry_in_ms: 2000 });
    expect(failed.message).toContain('(the server asked for 2000 ms); trying again in 2.0 s');
    await l.waitFor('started');
    await sleep(2_500);
    const times = server.requests.filter((r) => r.path === '/v1/runners/heartbeat').map((r) => r.at_ms);
    expect(times.length).toBe(2);
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(1_850);
  });
});

describe('Retry-After', () => {
  it('reads seconds and HTTP dates, caps what it honours, and ignores what it cannot read', () => {
    expect(parseRetryAfter('10')).toBe(10_000);
    expect(parseRetryAfter(new Date(1_000_000 + 7_000).toUTCString(), 1_000_000)).toBe(7_000);
    expect(parseRetryAfter('999999')).toBe(RETRY_AFTER_MAX_MS);
    expect(parseRetryAfter('soon')).toBe(null);
    expect(parseRetryAfter(null)).toBe(null);
  });
});
