// A local stand-in for E2B, for the e2b launcher's tests: the control plane's REST calls the SDK
// makes (create, connect, list, kill, set timeout) and a sandbox's envd (the process service's
// start, stream and signal over Connect-RPC, built from the SDK's own generated service descriptors;
// the filesystem's read and write over its HTTP /files), on one 127.0.0.1 port. A sandbox is a temp
// directory that is its $HOME; its commands run as local processes. The SDK is pointed here by its
// apiUrl and sandboxUrl options; only this far end is stood in.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileDesc, serviceDesc } from '@bufbuild/protobuf/codegenv2';
import { connectNodeAdapter } from '@connectrpc/connect-node';

const require = createRequire(import.meta.url);

/** The SDK's envd process service, from the descriptor its build embeds. */
function processService() {
  const text = readFileSync(join(dirname(require.resolve('e2b')), 'index.mjs'), 'utf8');
  for (const m of text.matchAll(/serviceDesc\(\/\* @__PURE__ \*\/ fileDesc\("([^"]+)"\), 0\)/g)) {
    const svc = serviceDesc(fileDesc(m[1]), 0);
    if (svc.typeName === 'process.Process') return svc;
  }
  throw new Error('the e2b package no longer embeds the process.Process descriptor');
}

const groupKill = (pid, sig) => {
  try {
    process.kill(-pid, sig);
  } catch {
    // already gone
  }
};

/**
 * @param {{ apiKey?: string }} [opts]
 */
export async function fakeE2b({ apiKey = 'e2b_test_key' } = {}) {
  /** @type {Map<string, any>} */
  const sandboxes = new Map();
  /** Each control-plane call, as `METHOD path`, for assertions. */
  const calls = [];
  /** The next creates' failure, as `{ status, message }`, or null. */
  const state = { failCreate: null };
  let seq = 0;

  const kill = (sbx) => {
    if (!sbx.alive) return;
    sbx.alive = false;
    sbx.killedAtMs = Date.now();
    clearTimeout(sbx.timer);
    for (const pid of sbx.procs.keys()) groupKill(pid, 'SIGKILL');
  };
  const arm = (sbx, timeoutS) => {
    clearTimeout(sbx.timer);
    sbx.endAt = Date.now() + timeoutS * 1000;
    sbx.timer = setTimeout(() => kill(sbx), timeoutS * 1000);
  };
  const info = (sbx) => ({
    sandboxID: sbx.id, templateID: sbx.template, clientID: 'fake', envdVersion: '0.5.7', metadata: sbx.metadata,
    startedAt: new Date(sbx.startedAt).toISOString(), endAt: new Date(sbx.endAt).toISOString(), state: 'running', cpuCount: 1, memoryMB: 512,
  });
  const sandboxOf = (id) => {
    const sbx = sandboxes.get(id);
    return sbx?.alive ? sbx : null;
  };

  /** The control plane: POST /v2/sandboxes, GET /v2/sandboxes, connect, timeout, DELETE. */
  function controlPlane(method, url, body) {
    const path = url.pathname;
    let m;
    if (method === 'POST' && path === '/v2/sandboxes') {
      if (state.failCreate) return [state.failCreate.status, { code: state.failCreate.status, message: state.failCreate.message }];
      const id = `fake${++seq}${Math.random().toString(36).slice(2, 8)}`;
      const sbx = { id, template: body.templateID, metadata: body.metadata ?? {}, home: mkdtempSync(join(tmpdir(), 'fake-e2b-')), alive: true, procs: new Map(), startedAt: Date.now(), endAt: 0, timer: null, timeoutS: body.timeout };
      sandboxes.set(id, sbx);
      arm(sbx, body.timeout ?? 300);
      return [201, info(sbx)];
    }
    if (method === 'GET' && path === '/v2/sandboxes') {
      const want = new URLSearchParams(decodeURIComponent(url.searchParams.get('metadata') ?? ''));
      const hits = [...sandboxes.values()].filter((s) => s.alive && [...want].every(([k, v]) => s.metadata[k] === v));
      return [200, hits.map(info)];
    }
    if ((m = path.match(/^\/v2\/sandboxes\/([^/]+)\/connect$/)) && method === 'POST') {
      const sbx = sandboxOf(m[1]);
      return sbx ? [200, info(sbx)] : [404, { code: 404, message: `sandbox ${m[1]} not found` }];
    }
    if ((m = path.match(/^\/sandboxes\/([^/]+)\/timeout$/)) && method === 'POST') {
      const sbx = sandboxOf(m[1]);
      if (!sbx) return [404, { code: 404, message: `sandbox ${m[1]} not found` }];
      arm(sbx, body.timeout);
      return [204, null];
    }
    if ((m = path.match(/^\/sandboxes\/([^/]+)$/)) && method === 'DELETE') {
      const sbx = sandboxOf(m[1]);
      if (!sbx) return [404, { code: 404, message: `sandbox ${m[1]} not found` }];
      kill(sbx);
      return [204, null];
    }
    return null;
  }

  /** envd's filesystem over HTTP: GET /files reads a file, POST /files (octet-stream) writes one. */
  function files(req, res, url, sbx, raw) {
    const path = url.searchParams.get('path') ?? '';
    if (req.method === 'GET') {
      let bytes;
      try {
        bytes = readFileSync(path);
      } catch {
        return send(res, 404, { code: 404, message: `file ${path} not found` });
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) });
      return res.end(bytes);
    }
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, raw);
    return send(res, 200, [{ name: path.split('/').pop(), type: 'file', path }]);
  }

  /** envd's process service: Start streams a local process's output; SendSignal signals its group. */
  const routes = (router) => router.service(processService(), {
    async *start(req, ctx) {
      const sbx = sandboxOf(ctx.requestHeader.get('e2b-sandbox-id') ?? '');
      if (!sbx) throw new Error('sandbox not found');
      const { cmd, args, envs, cwd } = req.process;
      const child = spawn(cmd, args, { cwd: cwd || sbx.home, env: { PATH: process.env.PATH, HOME: sbx.home, ...envs }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      sbx.procs.set(child.pid, child);
      const queue = [];
      let wake = () => {};
      const push = (e) => {
        queue.push(e);
        wake();
      };
      child.stdout.on('data', (d) => push({ case: 'data', value: { output: { case: 'stdout', value: new Uint8Array(d) } } }));
      child.stderr.on('data', (d) => push({ case: 'data', value: { output: { case: 'stderr', value: new Uint8Array(d) } } }));
      child.on('close', (code, signal) => {
        sbx.procs.delete(child.pid);
        const exitCode = code ?? -1;
        push({ case: 'end', value: { exitCode, exited: code !== null, status: signal ? `signal: ${signal}` : `exit status ${exitCode}` } });
      });
      yield { event: { event: { case: 'start', value: { pid: child.pid } } } };
      for (;;) {
        while (queue.length === 0) await new Promise((r) => (wake = r));
        const e = queue.shift();
        yield { event: { event: e } };
        if (e.case === 'end') return;
      }
    },
    async sendSignal(req) {
      const pid = req.process?.selector?.value;
      groupKill(pid, req.signal === 15 ? 'SIGTERM' : 'SIGKILL');
      return {};
    },
  });

  const fallback = (req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      if (url.pathname === '/files' || url.pathname === '/health') {
        const sbx = sandboxOf(String(req.headers['e2b-sandbox-id'] ?? ''));
        if (!sbx) return send(res, 502, { code: 502, message: 'sandbox not found' });
        return url.pathname === '/health' ? send(res, 204, null) : files(req, res, url, sbx, raw);
      }
      calls.push(`${req.method} ${url.pathname}`);
      if (req.headers['x-api-key'] !== apiKey) return send(res, 401, { code: 401, message: 'Invalid API key' });
      const answer = controlPlane(req.method, url, raw.length ? JSON.parse(raw.toString('utf8')) : {});
      return answer ? send(res, answer[0], answer[1]) : send(res, 404, { code: 404, message: `no route ${req.method} ${url.pathname}` });
    });
  };

  const server = createServer(connectNodeAdapter({ routes, fallback }));
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`;
  return {
    url,
    apiKey,
    sandboxes,
    calls,
    state,
    /** The sandboxes still alive. */
    alive: () => [...sandboxes.values()].filter((s) => s.alive),
    close: async () => {
      for (const sbx of sandboxes.values()) {
        kill(sbx);
        rmSync(sbx.home, { recursive: true, force: true });
      }
      server.closeAllConnections?.();
      await new Promise((r) => server.close(() => r(undefined)));
    },
  };
}

function send(res, status, body) {
  res.writeHead(status, body === null ? {} : { 'content-type': 'application/json' });
  res.end(body === null ? '' : JSON.stringify(body));
}
