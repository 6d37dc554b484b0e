// The user docs are read in the repository (on its hosting page or in a clone): every file they
// link to or cite by a relative path is in the repository, so none of their references is dead.

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(__dirname, "..", "..");
const DOCS = ["README.md", "runner-cli/README.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

/** The relative paths a Markdown file points at: its links' targets and the `../…` paths it cites. */
function references(text: string): string[] {
  const links = [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)].map((m) => m[1]).filter((t) => !/^[a-z]+:/i.test(t));
  const cited = [...text.matchAll(/(?<![\w/.])((?:\.\.\/)+[\w./-]+\.\w+)/g)].map((m) => m[1]);
  return [...links, ...cited];
}

describe("the user docs", () => {
  it("link to and cite only files that are in the repository", () => {
    const dead: string[] = [];
    for (const doc of DOCS) {
      for (const ref of references(readFileSync(join(ROOT, doc), "utf8"))) {
        const target = resolve(dirname(join(ROOT, doc)), ref);
        if (relative(ROOT, target).startsWith("..") || !existsSync(target)) dead.push(`${doc}: ${ref}`);
      }
    }
    expect(dead).toEqual([]);
  });
});
