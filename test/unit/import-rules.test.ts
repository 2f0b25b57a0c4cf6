/**
 * The tree's rules (docs/architecture.md, "Where things live"), read from the import graph
 * of src/: code that runs in a pool worker imports no orchestrator code and no surface's
 * prelude (only the table src/sandbox/surfaces/preludes.ts), the pool imports nothing from
 * a surface, src/sandbox keeps at most six modules at its root, and no import cycle exists
 * (type-only imports included).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

function modules(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const path = posix.join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) {
      if (path !== "src/gen") out.push(...modules(path));
    } else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

/** Each module's relative imports (static, dynamic, `export ... from`, `import type`), as repository paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const specifier = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;
  for (const file of modules("src")) {
    const text = readFileSync(join(ROOT, file), "utf8");
    const targets = new Set<string>();
    for (const m of text.matchAll(specifier)) targets.add(posix.normalize(posix.join(dirname(file), m[1]!)).replace(/\.js$/, ".ts"));
    graph.set(file, [...targets]);
  }
  return graph;
}

const graph = importGraph();

/** Everything `from` reaches through imports, `from` excluded. */
function reach(from: string): Set<string> {
  const seen = new Set<string>();
  const todo = [...(graph.get(from) ?? [])];
  while (todo.length > 0) {
    const next = todo.pop()!;
    if (seen.has(next)) continue;
    seen.add(next);
    todo.push(...(graph.get(next) ?? []));
  }
  return seen;
}

describe("the tree's import rules", () => {
  it("reads a graph that names only modules that exist", () => {
    expect(graph.size).toBeGreaterThan(100);
    const missing = [...graph].flatMap(([file, targets]) => targets.filter((t) => !t.startsWith("src/gen/") && !graph.has(t)).map((t) => `${file} -> ${t}`));
    expect(missing).toEqual([]);
  });

  it("worker code imports no orchestrator code and no surface's prelude", () => {
    const worker = [...graph.keys()].filter((f) => f.startsWith("src/sandbox/worker/"));
    expect(worker.length).toBeGreaterThan(10);
    for (const file of worker) {
      const direct = graph.get(file)!;
      expect(
        direct.filter((t) => t.startsWith("src/sandbox/surfaces/") && t !== "src/sandbox/surfaces/preludes.ts"),
        file,
      ).toEqual([]);
      expect(
        [...reach(file)].filter((t) => t.startsWith("src/orchestrator/")),
        file,
      ).toEqual([]);
    }
  });

  it("the pool imports nothing from a surface", () => {
    const pool = [...graph.keys()].filter((f) => f.startsWith("src/sandbox/pool/"));
    expect(pool.length).toBeGreaterThan(5);
    for (const file of pool)
      expect(
        [...reach(file)].filter((t) => t.startsWith("src/sandbox/surfaces/")),
        file,
      ).toEqual([]);
  });

  it("src/sandbox keeps at most six modules at its root", () => {
    const root = readdirSync(join(ROOT, "src/sandbox")).filter((n) => n.endsWith(".ts"));
    expect(root.length).toBeGreaterThan(0);
    expect(root.length).toBeLessThanOrEqual(6);
  });

  it("has no import cycle", () => {
    const cycles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const stack: string[] = [];
    const visit = (file: string) => {
      state.set(file, "open");
      stack.push(file);
      for (const next of graph.get(file) ?? []) {
        if (!graph.has(next)) continue;
        if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next].map((f) => relative("src", f)).join(" -> "));
        else if (!state.has(next)) visit(next);
      }
      stack.pop();
      state.set(file, "done");
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });
});
