// Checks HTTP exchanges against Docket's OpenAPI document (/v1/openapi.json): which operation a
// call is, and whether its request and answer keep the schemas the document gives them. Shared by
// the document's own test and the contract test of the runner (test/e2e/runner-contract.test.mjs).
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/** The base URI the document's components are known by, so `#/components/...` refs resolve. */
const DOC_ID = 'urn:docket:openapi';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Unescape one JSON pointer segment (RFC 6901). @param {string} s */
const unescapePointer = (s) => decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~');

/** The value a local `$ref` (`#/...`) points at in `doc`, or undefined. @param {any} doc @param {string} ref */
export function resolvePointer(doc, ref) {
  if (!ref.startsWith('#')) return undefined;
  let node = doc;
  for (const part of ref.slice(1).split('/').slice(1).map(unescapePointer)) {
    if (node === null || typeof node !== 'object' || !(part in node)) return undefined;
    node = node[part];
  }
  return node;
}

/**
 * What is wrong with the document beyond the OpenAPI schema: `$ref`s that do not resolve inside it,
 * and operationIds that are missing or used twice.
 * @param {any} doc @returns {string[]}
 */
export function documentProblems(doc) {
  const problems = [];
  const walk = (/** @type {any} */ node, /** @type {string} */ at) => {
    if (Array.isArray(node)) node.forEach((v, i) => walk(v, `${at}/${i}`));
    else if (node && typeof node === 'object') {
      if (typeof node.$ref === 'string' && resolvePointer(doc, node.$ref) === undefined) problems.push(`${at}: $ref ${node.$ref} does not resolve`);
      for (const [k, v] of Object.entries(node)) walk(v, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    }
  };
  walk(doc, '#');
  /** @type {Map<string, string>} */
  const seen = new Map();
  for (const { method, template, op } of operations(doc)) {
    const call = `${method.toUpperCase()} ${template}`;
    if (typeof op.operationId !== 'string' || !op.operationId) problems.push(`${call} has no operationId`);
    else if (seen.has(op.operationId)) problems.push(`operationId ${op.operationId} is used by both ${seen.get(op.operationId)} and ${call}`);
    else seen.set(op.operationId, call);
  }
  return problems;
}

/** Every operation of the document. @param {any} doc */
export function operations(doc) {
  const out = [];
  for (const [template, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) if (item?.[method]) out.push({ method, template, item, op: item[method] });
  }
  return out;
}

/** A path template (`/v1/runs/{id}`) as a pattern, literal segments counted so the most specific wins. @param {string} template */
function templatePattern(template) {
  const names = [];
  let literals = 0;
  const source = template.split('/').map((seg) => {
    const m = /^\{([^}]+)\}$/.exec(seg);
    if (m) {
      names.push(m[1]);
      return '([^/]+)';
    }
    literals += 1;
    return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }).join('/');
  return { pattern: new RegExp(`^${source}$`), names, literals };
}

/** Whether a content type (maybe with parameters) is JSON. @param {string | null | undefined} type */
const isJson = (type) => /^application\/([\w.+-]*\+)?json\b/i.test(type ?? '');

/** A body as a failure message shows it: short, and without the credentials it may carry. @param {string} text */
const excerpt = (text) => text.replace(/"(\w*(?:token|secret))"\s*:\s*"[^"]*"/gi, '"$1":"(hidden)"').slice(0, 300);

/** The first ajv error of a failed validation, readable. @param {any} validate */
function firstError(validate) {
  const e = validate.errors?.[0];
  if (!e) return 'does not match';
  return `${e.instancePath || '(body)'} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`;
}

/**
 * Exchanges against one document: `find(method, path)` names the operation, `check(exchange)` lists
 * what in the exchange the document does not allow (empty when it keeps the contract).
 */
export class ContractChecker {
  /** @param {any} doc the OpenAPI document as served */
  constructor(doc) {
    this.doc = doc;
    this.ajv = this.#ajv(false);
    // Path and query parameters arrive as strings: their schemas are checked with coercion.
    this.paramAjv = this.#ajv(true);
    /** @type {Map<string, any>} */
    this.compiled = new Map();
    this.routes = operations(doc)
      .map((o) => ({ ...o, ...templatePattern(o.template) }))
      .sort((a, b) => b.literals - a.literals);
  }

  /** @param {boolean} coerceTypes */
  #ajv(coerceTypes) {
    // strict off: OpenAPI schemas carry keywords JSON Schema does not know (example, discriminator, ...).
    const ajv = new Ajv2020({ strict: false, allErrors: false, coerceTypes, validateSchema: false });
    addFormats(ajv);
    ajv.addSchema({ $id: DOC_ID, components: this.doc.components ?? {} });
    return ajv;
  }

  /**
   * The operation a call is, by method and path (query left out); null when the document has none.
   * @param {string} method @param {string} path
   */
  find(method, path) {
    const pathname = new URL(path, 'http://docket.invalid').pathname;
    for (const route of this.routes) {
      if (route.method !== method.toLowerCase()) continue;
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      /** @type {Record<string, string>} */
      const params = {};
      route.names.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1])));
      return { operationId: route.op.operationId, template: route.template, op: route.op, item: route.item, params };
    }
    return null;
  }

  /** A validator of the schema at `schema`, its local refs pointed at the document. @param {any} schema @param {string} key */
  validator(schema, key, params = false) {
    const cacheKey = `${params ? 'p' : 'b'}:${key}`;
    let v = this.compiled.get(cacheKey);
    if (!v) {
      const rebased = JSON.parse(JSON.stringify(schema), (k, val) => (k === '$ref' && typeof val === 'string' && val.startsWith('#/') ? DOC_ID + val : val));
      v = (params ? this.paramAjv : this.ajv).compile(rebased);
      this.compiled.set(cacheKey, v);
    }
    return v;
  }

  /**
   * What the document does not allow in one exchange.
   * @param {{ method: string, path: string, requestBody?: string, requestType?: string | null, status: number, responseBody?: string, responseType?: string | null }} x
   * @param {{ refusalExpected?: boolean }} [o] refusalExpected: the call was malformed on purpose,
   *   so a request that breaks its schema is right when the answer is a 400 refusal
   * @returns {string[]}
   */
  check(x, { refusalExpected = false } = {}) {
    const call = `${x.method} ${x.path}`;
    const found = this.find(x.method, x.path);
    if (!found) return [`${call}: the document describes no such operation`];
    const { op, item, template, operationId } = found;
    const name = `${call} (${operationId}, ${x.method} ${template}) answered ${x.status}`;
    const problems = [];
    const base = `#/paths/${template.replace(/~/g, '~0').replace(/\//g, '~1')}/${x.method.toLowerCase()}`;

    // Parameters: path ones always, query ones when the call has them.
    const query = new URL(x.path, 'http://docket.invalid').searchParams;
    const declared = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p) => (p.$ref ? resolvePointer(this.doc, p.$ref) : p));
    for (const name_ of Object.keys(found.params)) {
      if (!declared.some((p) => p?.in === 'path' && p.name === name_)) problems.push(`${name}: path parameter ${name_} is not declared`);
    }
    for (const [i, p] of declared.entries()) {
      if (!p?.schema || (p.in !== 'path' && p.in !== 'query')) continue;
      const value = p.in === 'path' ? found.params[p.name] : query.get(p.name) ?? undefined;
      if (value === undefined) {
        if (p.required) problems.push(`${name}: required ${p.in} parameter ${p.name} is missing`);
        continue;
      }
      const holder = { v: value };
      const v = this.validator({ type: 'object', properties: { v: p.schema } }, `${base}/parameters/${i}`, true);
      if (!v(holder)) problems.push(`${name}: ${p.in} parameter ${p.name}=${JSON.stringify(value)}: ${firstError(v).replace(/^\/v /, "")}`);
    }
    for (const key of query.keys()) {
      if (!declared.some((p) => p?.in === 'query' && p.name === key)) problems.push(`${name}: query parameter ${key} is not declared`);
    }

    // The request body.
    const reqText = x.requestBody ?? '';
    const reqBody = op.requestBody?.$ref ? resolvePointer(this.doc, op.requestBody.$ref) : op.requestBody;
    if (refusalExpected && x.status === 400) {
      // The request was meant to be refused; its body is not held to the schema.
    } else if (reqText.trim()) {
      const media = reqBody?.content?.['application/json'];
      if (media?.schema) problems.push(...this.#body(media.schema, `${base}/requestBody`, reqText, `${name}: request body`));
      // An empty object where no body is described is what many clients send for "nothing": not a difference.
      else if (!/^\s*\{\s*\}\s*$/.test(reqText)) problems.push(`${name}: the request has a body but the document gives it no JSON schema`);
    } else if (reqBody?.required) problems.push(`${name}: the document requires a request body; none was sent`);

    // The answer: its status, then its body by its content type.
    const responses = op.responses ?? {};
    const answer = responses[String(x.status)] ?? responses[`${String(x.status)[0]}XX`] ?? responses.default;
    if (!answer) return [...problems, `${name}: status ${x.status} is not declared (declared: ${Object.keys(responses).join(', ')})`];
    if (typeof answer.description !== 'string') problems.push(`${name}: the declared answer ${x.status} has no description (is the operation described?)`);
    const resText = x.responseBody ?? '';
    if (!resText.trim()) return problems;
    const content = answer.content ?? {};
    const mediaType = (x.responseType ?? '').split(';')[0].trim().toLowerCase();
    const media = content[mediaType] ?? (isJson(mediaType) ? Object.entries(content).find(([t]) => isJson(t))?.[1] : undefined);
    if (!media) return [...problems, `${name}: the answer's ${mediaType || 'untyped'} body is not described (described: ${Object.keys(content).join(', ') || 'none'})`];
    if (isJson(mediaType) && media.schema) problems.push(...this.#body(media.schema, `${base}/responses/${x.status}`, resText, `${name}: answer body`));
    return problems;
  }

  /**
   * What the document does not allow in any of `exchanges`, one line per operation, status and
   * problem (the first call it was seen on, and how many more calls had it).
   * @param {Parameters<ContractChecker['check']>[0][]} exchanges
   */
  checkAll(exchanges) {
    /** @type {Map<string, { line: string, count: number }>} */
    const seen = new Map();
    for (const x of exchanges) {
      const found = this.find(x.method, x.path);
      for (const line of this.check(x)) {
        // The same problem on another run's path is the same problem: keyed by template, not path.
        const key = `${x.method} ${found?.template ?? x.path} ${x.status} ${line.replace(/^.*? answered \d+: /, '').replace(/; body: .*$/s, '')}`;
        const entry = seen.get(key);
        if (entry) entry.count += 1;
        else seen.set(key, { line, count: 1 });
      }
    }
    return [...seen.values()].map(({ line, count }) => (count > 1 ? `${line} (and ${count - 1} more such calls)` : line));
  }

  /** @param {any} schema @param {string} key @param {string} text @param {string} label */
  #body(schema, key, text, label) {
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      return [`${label} is not JSON: ${excerpt(text)}`];
    }
    const v = this.validator(schema, key);
    return v(value) ? [] : [`${label} does not match its schema: ${firstError(v)}; body: ${excerpt(text)}`];
  }
}

/**
 * A generic client of the document, as a new user's generated one would be: it knows nothing of
 * Docket but the document. It calls an operation by its operationId, fills the path template,
 * sends the credential its security scheme names, and keeps each exchange for `ContractChecker`.
 */
export class DocumentClient {
  /**
   * @param {any} doc @param {string} deployment the deployment's base URL (the document's server is relative to it)
   * @param {Record<string, string>} credentials a bearer token per security scheme name (memberToken, adminSecret, ...)
   */
  constructor(doc, deployment, credentials = {}) {
    this.doc = doc;
    this.base = new URL(doc.servers?.[0]?.url ?? '/', deployment).href.replace(/\/$/, '');
    this.credentials = credentials;
    /** @type {Parameters<ContractChecker['check']>[0][]} */
    this.exchanges = [];
  }

  /**
   * @param {string} operationId
   * @param {{ path?: Record<string, string | number>, query?: Record<string, string | number>, headers?: Record<string, string>, body?: any }} [o]
   */
  async call(operationId, { path = {}, query = {}, headers = {}, body } = {}) {
    const found = operations(this.doc).find((o) => o.op.operationId === operationId);
    if (!found) throw new Error(`the document has no operation ${operationId}`);
    const url = found.template.replace(/\{([^}]+)\}/g, (_, name) => {
      if (!(name in path)) throw new Error(`${operationId} needs the path parameter ${name}`);
      return encodeURIComponent(String(path[name]));
    });
    const search = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString();
    const target = url + (search ? `?${search}` : '');
    /** @type {Record<string, string>} */
    const sent = { ...headers };
    const scheme = Object.keys(found.op.security?.[0] ?? {})[0];
    if (scheme) {
      const token = this.credentials[scheme];
      if (!token) throw new Error(`${operationId} needs a ${scheme} credential`);
      sent.authorization = `Bearer ${token}`;
    }
    const requestBody = body === undefined ? '' : JSON.stringify(body);
    if (requestBody) sent['content-type'] = 'application/json';
    const res = await fetch(this.base + target, { method: found.method.toUpperCase(), headers: sent, body: requestBody || undefined, signal: AbortSignal.timeout(30_000) });
    const responseBody = await res.text();
    this.exchanges.push({ method: found.method.toUpperCase(), path: target, requestBody, requestType: sent['content-type'] ?? null, status: res.status, responseBody, responseType: res.headers.get('content-type') });
    return { status: res.status, body: isJson(res.headers.get('content-type')) && responseBody ? JSON.parse(responseBody) : responseBody };
  }
}
