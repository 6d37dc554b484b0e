// A local stand-in for Cloudflare's container egress sidecar (the `cloudflare/proxy-everything`
// image workerd starts next to each container, which cannot be pulled here). It owns the network
// namespace the container joins, and does the three things workerd asks of it
// (workerd's src/workerd/server/container-client.c++):
//
// - GET /ca on the ingress address: the CA workerd gives the container (none here: no TLS interception).
// - PUT /egress on the ingress address: workerd's egress listener port and the host names it
//   intercepts (`dns.allowHostnames`). Each plain name is pointed at this sidecar in the
//   namespace's /etc/hosts, which the container shares.
// - CONNECT on the ingress address: workerd reaching a port of the container; 400 when nothing
//   listens there (workerd reads it as "not listening").
// - HTTP from the container to an intercepted name arrives on port 80 here and goes to workerd's
//   egress listener through a CONNECT tunnel with the name in X-Hostname; workerd hands it to the
//   Durable Object's outbound handler. Nothing else leaves: there is no internet path.
//
//   node proxy.mjs --http-egress-port <port> --http-ingress-address <host:port> [flags workerd adds]
import { appendFileSync, readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";

const args = process.argv.slice(2);
const arg = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const HOSTS_FILE = "/etc/hosts";
// workerd adds the host gateway under this name to the sidecar (ExtraHosts host-gateway).
const WORKERD_HOST = "host.docker.internal";
const INTERCEPT_PORT = 80;
const BODY_MAX_BYTES = 64 * 1024;

let egressPort = Number(arg("--http-egress-port") ?? 0);
const [ingressHost, ingressPort] = (arg("--http-ingress-address") ?? "0.0.0.0:39001").split(":");

const log = (msg, fields = {}) => console.log(JSON.stringify({ msg, ...fields }));

/** Points each plain intercepted name at this namespace's loopback, where port 80 listens. */
function pointHostsHere(names) {
  const known = readFileSync(HOSTS_FILE, "utf8");
  for (const name of names) {
    if (name.includes("*") || known.split("\n").some((line) => line.split(/\s+/).slice(1).includes(name))) continue;
    appendFileSync(HOSTS_FILE, `127.0.0.1 ${name}\n`);
  }
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
      if (body.length > BODY_MAX_BYTES) reject(new Error("body too large"));
    });
    req.on("end", () => resolve(body ? JSON.parse(body) : {}));
    req.on("error", reject);
  });
}

const ingress = http.createServer(async (req, res) => {
  if (req.method === "PUT" && req.url === "/egress") {
    try {
      const config = await readJson(req);
      if (Number.isInteger(config.port)) egressPort = config.port;
      pointHostsHere(config.dns?.allowHostnames ?? []);
      log("egress configured", { egressPort, hosts: config.dns?.allowHostnames ?? [] });
      res.writeHead(200).end();
    } catch (err) {
      res.writeHead(400).end(String(err));
    }
    return;
  }
  // workerd copies this into the container as the CA of TLS interception; the stand-in intercepts
  // plain HTTP only, so there is no certificate in it.
  if (req.method === "GET" && req.url === "/ca") {
    res.writeHead(200, { "content-type": "text/plain" }).end("# the local egress stand-in intercepts HTTP only: no CA\n");
    return;
  }
  res.writeHead(404).end();
});

// workerd reaching the container's port: the container shares this namespace, so it is on loopback.
ingress.on("connect", (req, client, head) => {
  const port = Number(String(req.headers["x-dst-addr"] ?? req.url).split(":").pop());
  const upstream = net.connect(port, "127.0.0.1");
  upstream.once("connect", () => {
    client.write("HTTP/1.1 200 OK\r\n\r\n");
    if (head.length) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.once("error", () => {
    if (client.writable) client.end("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
  });
  client.on("error", () => upstream.destroy());
});

/** Opens a CONNECT tunnel to workerd's egress listener for one request to `hostname`. */
function tunnel(hostname) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: WORKERD_HOST,
      port: egressPort,
      method: "CONNECT",
      path: `${hostname}:${INTERCEPT_PORT}`,
      headers: { "X-Hostname": hostname },
    });
    req.once("connect", (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`egress tunnel: ${res.statusCode}`))));
    req.once("error", reject);
    req.end();
  });
}

const intercept = http.createServer(async (req, res) => {
  const hostname = String(req.headers.host ?? "").split(":")[0];
  try {
    const socket = await tunnel(hostname);
    const out = http.request({ createConnection: () => socket, method: req.method, path: req.url, headers: req.headers });
    out.once("response", (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.once("error", (err) => res.headersSent ? res.destroy(err) : res.writeHead(502).end(String(err)));
    req.pipe(out);
  } catch (err) {
    res.writeHead(502).end(String(err));
  }
});

ingress.listen(Number(ingressPort), ingressHost, () => log("ingress listening", { ingressHost, ingressPort }));
intercept.listen(INTERCEPT_PORT, "127.0.0.1", () => log("intercepting", { port: INTERCEPT_PORT }));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
