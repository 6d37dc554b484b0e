// Layers read top-down: routes translate HTTP to the domain and back, so only the app (which
// mounts them) may import a route. A domain module that reached into src/routes/ would tie the
// engine to the HTTP surface (issue: "Layers that read top-down").

import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const routes = join(root, "src/routes");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.(ts|mts|js|mjs)$/.test(e.name) ? [path] : [];
  });
}

/** Every module specifier a file names: static imports, re-exports, side-effect and dynamic imports. */
export function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const re of [/\bfrom\s*["']([^"']+)["']/g, /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g, /^\s*import\s*["']([^"']+)["']/gm]) {
    for (const m of text.matchAll(re)) found.push(m[1]);
  }
  return found;
}

/** "src/x.ts imports src/routes/y" for each import of a route from outside the routes and the app. */
function routeImports(): string[] {
  const allowed = (file: string) => file.startsWith(routes + "/") || file === join(root, "src/app.ts");
  const files = [...sourceFiles(join(root, "src")), ...sourceFiles(join(root, "durable-objects"))].filter((f) => !allowed(f));
  return files.flatMap((file) =>
    specifiers(readFileSync(file, "utf8"))
      .filter((s) => s.startsWith("."))
      .map((s) => resolve(dirname(file), s))
      .filter((target) => target === routes || target.startsWith(routes + "/"))
      .map((target) => `${relative(root, file)} imports ${relative(root, target)}`),
  );
}

describe("layers", () => {
  it("finds every kind of import line it is meant to catch", () => {
    const text = [
      'import { a } from "../routes/runs";',
      "import {\n  b,\n} from '../routes/stubs';",
      'export { c } from "./routes/x";',
      'import "../routes/side-effect";',
      'const d = await import("../routes/lazy");',
    ].join("\n");
    expect(specifiers(text)).toEqual(expect.arrayContaining(["../routes/runs", "../routes/stubs", "./routes/x", "../routes/side-effect", "../routes/lazy"]));
  });

  it("nothing outside src/routes/ and src/app.ts imports a route", () => {
    expect(routeImports()).toEqual([]);
  });
});
