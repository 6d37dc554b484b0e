// The runner's imports go one way (STYLE.md, "Lessons from the autopilot layer"): the listener to
// its jobs, a job to the launchers, the daemon to its steps. A module that imports one that imports
// it back (a type import too) ties the two into one and hides which one decides.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** The runner modules a file imports: static, type-only, re-exported and dynamic imports of ./ and ../ paths inside src. */
function importsOf(file) {
  const text = readFileSync(file, 'utf8');
  const found = [];
  for (const re of [/\bfrom\s*'(\.[^']+)'/g, /\bimport\s*\(\s*'(\.[^']+)'\s*\)/g]) {
    for (const m of text.matchAll(re)) {
      const target = resolve(dirname(file), m[1].replace(/\.js$/, '.ts'));
      if (target.startsWith(src + '/') && existsSync(target)) found.push(target);
    }
  }
  return found;
}

/** Each import cycle among the files, once, as "a.ts -> b.ts -> a.ts". */
export function importCycles(graph) {
  const cycles = new Set();
  const visit = (file, path) => {
    const at = path.indexOf(file);
    if (at >= 0) {
      const loop = path.slice(at);
      const first = loop.indexOf([...loop].sort()[0]);
      const turned = [...loop.slice(first), ...loop.slice(0, first)];
      cycles.add([...turned, turned[0]].join(' -> '));
      return;
    }
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
  };
  for (const file of graph.keys()) visit(file, []);
  return [...cycles];
}

describe('the runner imports one way', () => {
  it('finds a cycle of two and of three modules, and none in a chain', () => {
    const graph = new Map([['a', ['b']], ['b', ['a', 'c']], ['c', ['d']], ['d', ['e']], ['e', ['c']], ['x', ['y']], ['y', []]]);
    expect(importCycles(graph).sort()).toEqual(['a -> b -> a', 'c -> d -> e -> c']);
  });

  it('no module of runner-cli/src imports a module that imports it back, a type import included', () => {
    const files = sourceFiles(src);
    const graph = new Map(files.map((f) => [relative(src, f), importsOf(f).map((t) => relative(src, t))]));
    expect(graph.get('runner.ts')).toContain('job.ts');
    expect(importCycles(graph)).toEqual([]);
  });
});
