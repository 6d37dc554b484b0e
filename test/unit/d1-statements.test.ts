// D1 statements go through drizzle over the schema files of src/db/ (../shared/STYLE.md, "SQL lives
// with its schema"). SQL text is kept only where drizzle cannot say it, and each such statement says
// why in the comment just before it. Read as TypeScript, so a call is found however it is written.

import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The modules that bind SQL text drizzle itself built: a fixed statement, and a query joining a D1 batch. */
const DRIZZLE_TEXT = ["src/db/fixed-statement.ts", "src/lib/cost.ts"];

/** The comment a statement kept as SQL carries just before it. */
const WHY = /^\/\/ Raw SQL: \S/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

/** Each D1 prepare(sql) call of a module (drizzle's own prepare() takes no SQL), and whether the comment before its statement says why. */
export function rawStatements(text: string): { line: number; explained: boolean }[] {
  const source = ts.createSourceFile("module.ts", text, ts.ScriptTarget.Latest, true);
  const found: { line: number; explained: boolean }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === "prepare" && node.arguments.length > 0) {
      const line = source.getLineAndCharacterOfPosition(node.expression.name.getStart(source)).line + 1;
      const comments = ts.getLeadingCommentRanges(text, statementOf(node).getFullStart()) ?? [];
      found.push({ line, explained: comments.some((c) => WHY.test(text.slice(c.pos, c.end))) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The statement, or the element of a batch's list, that a call belongs to. */
function statementOf(node: ts.Node): ts.Node {
  let at = node;
  while (at.parent && !ts.isSourceFile(at.parent) && !ts.isBlock(at.parent) && !ts.isArrayLiteralExpression(at.parent)) at = at.parent;
  return at;
}

describe("D1 statements", () => {
  it("a D1 statement kept as SQL text says in the comment before it why drizzle cannot say it", () => {
    const unexplained = sourceFiles(join(root, "src"))
      .map((path) => relative(root, path))
      .filter((rel) => !DRIZZLE_TEXT.includes(rel))
      .flatMap((rel) =>
        rawStatements(readFileSync(join(root, rel), "utf8"))
          .filter((s) => !s.explained)
          .map((s) => `${rel}:${s.line}`),
      );
    expect(unexplained).toEqual([]);
  });

  it("finds a prepare() of SQL text however it is written, and only a commented one passes", () => {
    const text = [
      "const a = db.prepare(`SELECT 1`);",
      "// Raw SQL: a reason.",
      "const b = db",
      "  .prepare(`SELECT 2`)",
      "  .bind(1);",
      "const c = orm.select().from(t).prepare();",
      "await db.batch([",
      "  // Raw SQL: another reason.",
      "  db.prepare(`SELECT 3`),",
      "  db.prepare(`SELECT 4`),",
      "]);",
    ].join("\n");
    const found = rawStatements(text);
    expect(found.map((s) => s.line)).toEqual([1, 4, 9, 10]);
    expect(found.map((s) => s.explained)).toEqual([false, true, true, false]);
  });
});
