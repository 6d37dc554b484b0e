import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

// Storage is isolated per test file; each file starts from the migrated schema.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);

// Tests run offline and never send a request outside loopback. A test that expects a request to
// another host stubs `fetch` over this guard (stubReceiver, vi.spyOn); anything else that would
// leave the machine fails as an unreachable host does, before a name is looked up.
const LOOPBACK_HOSTS = /^(127(\.\d{1,3}){3}|\[::1\]|localhost)$/;
const network = globalThis.fetch;
globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (!LOOPBACK_HOSTS.test(url.hostname)) {
    return Promise.reject(new TypeError(`tests send no request outside loopback: ${url.host}`));
  }
  return network(input, init);
}) as typeof fetch;
