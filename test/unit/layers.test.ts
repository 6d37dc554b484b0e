// Layers read top-down, and imports go one way (issue: "Layers that read top-down"; ../shared/STYLE.md,
// "Lessons from Docket's own code"). Routes translate HTTP to the domain and back, so only the app
// (which mounts them) imports a route, and a route reaches a Durable Object only through a domain
// function. The domain never imports a route or an object class. The run's transition rules are pure
// and import only pure modules. No two modules import each other, however long the loop. And a
// module's dependencies are passed to it, never installed into a slot of its own at load time.
// Each rule below is one test named after it; each reads the source as TypeScript, so a rule sees
// an import however it is written (type-only, re-export, side effect, dynamic).

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The trees whose modules the rules cover: the Worker, its Durable Objects, the runner CLI. */
const TREES = ["src", "durable-objects", "runner-cli/src"];

/** The HTTP surface: the app, the Worker's entry, the routes and the dashboard's pages. Everything else in src/ is the domain. */
const HTTP_SURFACE = [/^src\/app\.ts$/, /^src\/index\.ts$/, /^src\/routes\//, /^src\/dashboard\//];
/** The cron's passes over the whole plane: the entry's cron handler and the routes start them. */
const PASSES = ["src/recovery.ts", "src/publication-recovery.ts", "src/retention.ts", "src/alarm-backstop.ts"];
/** The pure rules (../shared/DESIGN.md, "The run state machine"): no I/O, tested without a runtime. decide() picks one rule of src/run/rules/ per command. */
const PURE_RULES = ["src/run/decide.ts", "src/run/states.ts", "src/run/rules/draft.ts"];
/** The modules the pure rules may import: themselves pure, and importing only each other (and zod). */
const PURE = [...PURE_RULES, /^src\/run\/rules\//, "src/run/publication.ts", "src/run/types.ts", "src/run/ticket-requests.ts", "src/lib/backoff.ts", /^src\/protocol\//];
const PURE_PACKAGES = ["zod"];
/** A module of the Worker or its objects longer than this is split by concern (../shared/STYLE.md, "Thin objects, named concerns": modules of a few hundred lines). */
const MODULE_LINES_MAX = 450;
/** What a pure module never calls: the clock, randomness, the network, timers, the log. */
const IMPURE_CALLS = /\b(Date\.now|Math\.random|fetch|crypto\.\w+|setTimeout|setInterval|console\.\w+)\s*\(/;

type Pattern = string | RegExp;
const matches = (rel: string, patterns: Pattern[]) => patterns.some((p) => (typeof p === "string" ? p === rel : p.test(rel)));

interface Import {
  specifier: string;
  /** Erased at build: `import type`, `export type`, or every named binding marked `type`. */
  typeOnly: boolean;
}

/** A module's text as TypeScript reads it; the rules below take either. */
function parsed(text: string | ts.SourceFile, fileName = join(root, "module.ts")): ts.SourceFile {
  return typeof text === "string" ? ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true) : text;
}

/** Every module a source text names: static imports, re-exports, side-effect and dynamic imports, import types. */
export function importsOf(text: string | ts.SourceFile): Import[] {
  const source = parsed(text);
  const found: Import[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: typeOnlyImport(node.importClause) });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const named = node.exportClause && ts.isNamedExports(node.exportClause) ? node.exportClause.elements : null;
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly || (!!named && named.length > 0 && named.every((e) => e.isTypeOnly)) });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      found.push({ specifier: node.arguments[0].text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ specifier: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function typeOnlyImport(clause: ts.ImportClause | undefined): boolean {
  if (!clause) return false; // `import "./x"` runs the module
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  return !clause.name && !!bindings && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|mts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The repository-relative file a relative specifier names (the runner writes `./x.js` for `./x.ts`). */
function resolveSpecifier(from: string, specifier: string): string {
  const base = resolve(dirname(from), specifier);
  const candidates = [base, base.replace(/\.(m?js)$/, ".ts"), `${base}.ts`, `${base}.tsx`, join(base, "index.ts")];
  const hit = candidates.find((c) => existsSync(c) && statSync(c).isFile());
  return relative(root, hit ?? base);
}

interface Edge {
  from: string;
  /** A repository-relative file, or the package's name. */
  to: string;
  typeOnly: boolean;
  package: boolean;
}

function readModules(): Map<string, { text: string; source: ts.SourceFile; edges: Edge[] }> {
  const modules = new Map<string, { text: string; source: ts.SourceFile; edges: Edge[] }>();
  for (const file of TREES.flatMap((tree) => sourceFiles(join(root, tree)))) {
    const from = relative(root, file);
    const text = readFileSync(file, "utf8");
    const source = parsed(text, file);
    const edges = importsOf(source).map(({ specifier, typeOnly }) =>
      specifier.startsWith(".")
        ? { from, to: resolveSpecifier(file, specifier), typeOnly, package: false }
        : { from, to: specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/"), typeOnly, package: true },
    );
    modules.set(from, { text, source, edges });
  }
  return modules;
}

const modules = readModules();
const edges = [...modules.values()].flatMap((m) => m.edges);
const line = (e: Edge) => `${e.from} imports ${e.to}${e.typeOnly ? " (types)" : ""}`;

/**
 * The loops in the import graph, each as "a -> b -> a". Type-only imports count: two modules that
 * name each other's types are one concern in two files. src/env.ts is left out: it names each
 * Durable Object class for its typed binding, and every layer reads Env.
 */
function importCycles(): string[] {
  const next = new Map<string, string[]>();
  for (const e of edges) if (!e.package && modules.has(e.to) && e.from !== "src/env.ts") next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const cycles: string[] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const walk = (file: string): void => {
    state.set(file, "open");
    path.push(file);
    for (const to of next.get(file) ?? []) {
      if (state.get(to) === "open") cycles.push([...path.slice(path.indexOf(to)), to].join(" -> "));
      else if (!state.has(to)) walk(to);
    }
    path.pop();
    state.set(file, "done");
  };
  for (const file of [...modules.keys()].sort()) if (!state.has(file)) walk(file);
  return cycles;
}

/**
 * "file: fn() sets its module's slot" for each exported function that assigns one of its
 * parameters to a module-level `let`: a setter through which a caller installs a dependency.
 */
export function installedSlots(text: string | ts.SourceFile, fileName?: string): string[] {
  const source = parsed(text, fileName);
  const slots = new Set<string>();
  for (const s of source.statements) {
    if (ts.isVariableStatement(s) && s.declarationList.flags & ts.NodeFlags.Let) {
      for (const d of s.declarationList.declarations) if (ts.isIdentifier(d.name)) slots.add(d.name.text);
    }
  }
  const found: string[] = [];
  for (const fn of exportedFunctions(source)) {
    const params = new Set(fn.parameters.map((p) => p.name.getText(source)));
    const visit = (node: ts.Node): void => {
      const assigns = ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken;
      if (assigns && ts.isIdentifier(node.left) && slots.has(node.left.text) && ts.isIdentifier(node.right) && params.has(node.right.text)) {
        found.push(`${relative(root, source.fileName)}: ${fn.name ?? "an export"}() sets the module's ${node.left.text}`);
      }
      ts.forEachChild(node, visit);
    };
    if (fn.body) visit(fn.body);
  }
  return found;
}

function exportedFunctions(source: ts.SourceFile): { name: string | null; parameters: readonly ts.ParameterDeclaration[]; body: ts.Node | undefined }[] {
  const exported = (s: ts.Statement) => ts.canHaveModifiers(s) && (ts.getModifiers(s) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  return source.statements.filter(exported).flatMap((s) => {
    if (ts.isFunctionDeclaration(s)) return [{ name: s.name?.text ?? null, parameters: s.parameters, body: s.body }];
    if (!ts.isVariableStatement(s)) return [];
    return s.declarationList.declarations.flatMap((d) =>
      d.initializer && (ts.isArrowFunction(d.initializer) || ts.isFunctionExpression(d.initializer))
        ? [{ name: d.name.getText(source), parameters: d.initializer.parameters, body: d.initializer.body }]
        : [],
    );
  });
}

/** "file: f() runs at load" for each top-level statement that calls a function the module imported. */
export function callsAtLoad(text: string | ts.SourceFile, fileName?: string): string[] {
  const source = parsed(text, fileName);
  const imported = new Set<string>();
  for (const s of source.statements) {
    if (!ts.isImportDeclaration(s) || !s.importClause || s.importClause.isTypeOnly) continue;
    if (s.importClause.name) imported.add(s.importClause.name.text);
    const bindings = s.importClause.namedBindings;
    if (bindings && ts.isNamespaceImport(bindings)) imported.add(bindings.name.text);
    if (bindings && ts.isNamedImports(bindings)) for (const e of bindings.elements) if (!e.isTypeOnly) imported.add(e.name.text);
  }
  const rootName = (e: ts.Expression): string | null =>
    ts.isIdentifier(e) ? e.text : ts.isPropertyAccessExpression(e) || ts.isCallExpression(e) ? rootName(e.expression) : ts.isAwaitExpression(e) ? rootName(e.expression) : null;
  return source.statements.flatMap((s) => {
    if (!ts.isExpressionStatement(s)) return [];
    const expr = ts.isAwaitExpression(s.expression) ? s.expression.expression : s.expression;
    const name = ts.isCallExpression(expr) ? rootName(expr.expression) : null;
    return name && imported.has(name) ? [`${relative(root, source.fileName)}: ${expr.getText(source)} runs at load`] : [];
  });
}

describe("layers", () => {
  it("finds every kind of import it is meant to catch, and tells the type-only ones", () => {
    const text = [
      'import { a } from "../routes/runs";',
      "import {\n  b,\n} from '../routes/stubs';",
      'export { c } from "./routes/x";',
      'import "../routes/side-effect";',
      'const d = await import("../routes/lazy");',
      'import type { E } from "./types-only";',
      'import { type F, type G } from "./all-named-types";',
      'import { type H, i } from "./one-value";',
      'export type { J } from "./re-exported-type";',
      'let k: import("./import-type").K;',
    ].join("\n");
    expect(importsOf(text)).toEqual([
      { specifier: "../routes/runs", typeOnly: false },
      { specifier: "../routes/stubs", typeOnly: false },
      { specifier: "./routes/x", typeOnly: false },
      { specifier: "../routes/side-effect", typeOnly: false },
      { specifier: "../routes/lazy", typeOnly: false },
      { specifier: "./types-only", typeOnly: true },
      { specifier: "./all-named-types", typeOnly: true },
      { specifier: "./one-value", typeOnly: false },
      { specifier: "./re-exported-type", typeOnly: true },
      { specifier: "./import-type", typeOnly: true },
    ]);
  });

  it("nothing outside src/routes/ and src/app.ts imports a route", () => {
    const allowed = (file: string) => file.startsWith("src/routes/") || file === "src/app.ts";
    expect(edges.filter((e) => e.to.startsWith("src/routes/") && !allowed(e.from)).map(line)).toEqual([]);
  });

  it("routes reach Durable Objects only through domain functions: nothing in src/routes/ imports durable-objects/", () => {
    expect(edges.filter((e) => e.from.startsWith("src/routes/") && e.to.startsWith("durable-objects/")).map(line)).toEqual([]);
  });

  it("the domain never imports a route or a Durable Object class (durable-objects/*-object.ts)", () => {
    const domain = (file: string) => file.startsWith("src/") && !matches(file, HTTP_SURFACE);
    const objectClass = /^durable-objects\/(.+\/)?[^/]+-object\.ts$/;
    // src/env.ts names each object class for its typed binding; a type, never the class's code.
    const bindings = (e: Edge) => e.from === "src/env.ts" && e.typeOnly;
    const wrong = edges.filter((e) => domain(e.from) && (e.to.startsWith("src/routes/") || objectClass.test(e.to)) && !bindings(e));
    expect(wrong.map(line)).toEqual([]);
  });

  it("the cron's passes (recovery, publication recovery, retention, the alarm backstop) are started only by the Worker's entry and its routes", () => {
    const starts = (file: string) => file === "src/index.ts" || file.startsWith("src/routes/");
    expect(edges.filter((e) => PASSES.includes(e.to) && !starts(e.from)).map(line)).toEqual([]);
  });

  it("the pure rules (src/run/decide.ts, src/run/rules/, src/run/states.ts) import only pure modules, and those only each other", () => {
    for (const file of PURE_RULES) expect(modules.has(file), `${file} is missing`).toBe(true);
    const pure = [...modules.keys()].filter((file) => matches(file, PURE));
    const wrong = pure.flatMap((file) =>
      modules.get(file)!.edges.filter((e) => !e.typeOnly && (e.package ? !PURE_PACKAGES.includes(e.to) : !matches(e.to, PURE))).map(line),
    );
    expect(wrong).toEqual([]);
  });

  it("the pure modules call no clock, randomness, network, timer or log", () => {
    const pure = [...modules.keys()].filter((file) => matches(file, PURE));
    const impure = pure.flatMap((file) => (IMPURE_CALLS.exec(modules.get(file)!.text.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, "")) ? [file] : []));
    expect(impure).toEqual([]);
  });

  it(`no module of src/ or durable-objects/ is over ${MODULE_LINES_MAX} lines: one that grows past it is split by concern`, () => {
    const long = [...modules.entries()].flatMap(([file, m]) => {
      const lines = m.text.trimEnd().split("\n").length;
      return /^(src|durable-objects)\//.test(file) && lines > MODULE_LINES_MAX ? [`${file}: ${lines} lines`] : [];
    });
    expect(long).toEqual([]);
  });

  it("no two modules of src/, durable-objects/ or runner-cli/src/ import each other, directly or around a loop", () => {
    expect(importCycles()).toEqual([]);
  });

  it("dependencies are passed, not installed: no module exports a setter for a module-level slot", () => {
    const setters = [...modules.values()].flatMap((m) => installedSlots(m.source));
    expect(setters).toEqual([]);
  });

  it("dependencies are passed, not installed: no module calls an imported function when it is loaded", () => {
    const calls = [...modules.values()].flatMap((m) => callsAtLoad(m.source));
    expect(calls).toEqual([]);
  });

  it("the rules catch what they name: a setter for a module-level slot and an imported call at load", () => {
    const deps = "let installed = null;\nexport function install(deps) {\n  installed = deps;\n}\nexport function deps() { return installed; }";
    expect(installedSlots(deps, join(root, "src/x/deps.ts"))).toEqual(["src/x/deps.ts: install() sets the module's installed"]);
    const flag = "let kicking = false;\nexport async function kick(env) {\n  kicking = true;\n}";
    expect(installedSlots(flag, join(root, "src/x/kick.ts"))).toEqual([]);
    const entry = 'import { installDeps } from "./wiring";\nimport { Hono } from "hono";\nconst app = new Hono();\napp.get("/", () => null);\ninstallDeps();';
    expect(callsAtLoad(entry, join(root, "src/x/index.ts"))).toEqual(["src/x/index.ts: installDeps() runs at load"]);
  });
});
