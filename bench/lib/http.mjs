// A small HTTP client for the benchmarks: JSON in and out, a timeout on every call, and a count
// of the requests each part of the benchmark sends (HTTP requests per completed run, and so on).

/**
 * @typedef {{ status: number, body: any, headers: Headers, ms: number }} Answer
 * @typedef {{ requests: number }} Counter
 */

/**
 * @param {string} base e.g. http://127.0.0.1:8787
 * @param {Counter} [counter]
 */
export function client(base, counter = { requests: 0 }) {
  /**
   * @param {string} method @param {string} path
   * @param {{ token?: string, body?: any, headers?: Record<string, string>, timeoutMs?: number, signal?: AbortSignal }} [o]
   * @returns {Promise<Answer>}
   */
  async function call(method, path, { token, body, headers = {}, timeoutMs = 60_000, signal } = {}) {
    counter.requests += 1;
    const timeout = AbortSignal.timeout(timeoutMs);
    const started = performance.now();
    const res = await fetch(base + path, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = await res.text();
    const ms = performance.now() - started;
    let parsed = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.status, body: parsed, headers: res.headers, ms };
  }
  return { call, counter, base };
}

/**
 * Runs `count` tasks with at most `concurrency` at once; `task(i, lane)` gets the task's index and
 * the lane (0..concurrency-1) that runs it.
 * @template T
 * @param {number} count @param {number} concurrency @param {(i: number, lane: number) => Promise<T>} task
 * @returns {Promise<T[]>}
 */
export async function pool(count, concurrency, task) {
  /** @type {T[]} */
  const out = new Array(count);
  let next = 0;
  const lane = async (/** @type {number} */ l) => {
    while (next < count) {
      const i = next++;
      out[i] = await task(i, l);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, (_, l) => lane(l)));
  return out;
}

/** @param {number} ms */
export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** For a call that `stop` aborted: null instead of the abort error. @param {unknown} e */
export function ignoreAbort(e) {
  if (/** @type {any} */ (e)?.name === 'AbortError') return null;
  throw e;
}
