#!/usr/bin/env node
// Benchmark + behaviour check of candidate TypeScript -> JavaScript source
// transforms for guest cells (pure transform: no typecheck, no module
// resolution). Plain Node ESM, no build step:
//
//   node bench/ts-transform.bench.mjs [--runs N] [--iterations N] [--worker] [--only a,b]
//
//   --runs N        fresh child processes per option (default 5); timing and
//                   memory columns are the median over runs
//   --iterations N  warm transforms measured after the first one (default 200)
//   --worker        do the measurement inside a worker_thread of the child
//                   (the sidecar runs the transform in a piscina worker)
//   --only a,b      restrict to some options (typescript, sucrase, esbuild,
//                   amaro-strip, amaro-transform)
//
// amaro (Node's swc-wasm type stripper) is optional: it is used if it resolves
// from this project, or from AMARO_PATH (path of an installed amaro package
// directory, e.g. AMARO_PATH=/tmp/x/node_modules/amaro).
//
// Every option is measured in its own fresh child process, so the module load
// is cold as far as V8/Node is concerned (the OS page cache is warm after the
// first run, as it is for a sidecar that has been started before).

import { spawnSync } from "node:child_process";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";

const SELF = fileURLToPath(import.meta.url);
const require = createRequire(import.meta.url);

// ---------------------------------------------------------------------------
// How a cell is wrapped before transforming.
//
// A cell is a function body (top-level `await` and `return` are allowed), but
// `return` at module top level is not valid TS/JS, so every tool gets
//     PREFIX + cell + SUFFIX
// The prefix is on the SAME line as the first line of the cell, so line N of
// the cell is line N of the wrapped text (only columns on line 1 shift by
// PREFIX.length). Interfaces, type aliases and enums are legal inside a
// function body, so the same wrapping works for every tool.
// ---------------------------------------------------------------------------
const PREFIX = "async function __cell() { ";
const SUFFIX = "\n}";
const wrap = (code) => PREFIX + code + SUFFIX;

// Realistic ~40-line guest cell. `LIMIT` is varied per iteration so no tool can
// short-circuit on identical input.
const benchCell = (limit = 50) => `interface Issue {
  id: number;
  title: string;
  labels?: { name: string }[];
  assignee?: { login: string } | null;
}
enum Priority { Low = 1, Medium, High }
type Page<T> = { items: T[]; next?: string };
const LIMIT: number = ${limit};

async function fetchAll<T>(fn: (cursor?: string) => Promise<Page<T>>, limit: number = 100): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await fn(cursor);
    out.push(...page.items);
    cursor = page.next;
  } while (cursor && out.length < limit);
  return out;
}

const issues = await fetchAll<Issue>(
  (cursor) => tools.github.listIssues({ repo: "acme/api", cursor }) as Promise<Page<Issue>>,
  LIMIT,
);
const byPriority = new Map<Priority, Issue[]>();
for (const issue of issues) {
  const names: string[] = issue.labels?.map((l) => l.name) ?? [];
  const p: Priority = names.includes("p0") ? Priority.High : names.includes("p1") ? Priority.Medium : Priority.Low;
  const bucket = byPriority.get(p) ?? [];
  bucket.push(issue);
  byPriority.set(p, bucket);
}
const summary = {
  total: issues.length,
  high: byPriority.get(Priority.High)?.length ?? 0,
  unassigned: issues.filter((i) => !i.assignee?.login).length,
  topTitles: (byPriority.get(Priority.High) ?? []).slice(0, 3).map((i) => i.title),
} satisfies Record<string, unknown>;
const label = (Priority[Priority.High] as string).toLowerCase();
console.log(\`found \${summary.high} \${label} issues\`);
return { summary, label } as const;`;

// amaro strip-only mode rejects enums; it is timed on the same cell with the
// enum replaced by a same-length-in-lines const object (marked * in the table).
const stripEnum = (code) =>
  code.replace(
    "enum Priority { Low = 1, Medium, High }",
    'const Priority = { Low: 1, Medium: 2, High: 3, 1: "Low", 2: "Medium", 3: "High" } as const; type Priority = 1 | 2 | 3;',
  );

const EXPECTED_RESULT = JSON.stringify({
  summary: { total: 5, high: 2, unassigned: 2, topTitles: ["a", "d"] },
  label: "high",
});

function makeTools() {
  const pages = [
    {
      items: [
        { id: 1, title: "a", labels: [{ name: "p0" }], assignee: { login: "x" } },
        { id: 2, title: "b" },
      ],
      next: "c1",
    },
    {
      items: [
        { id: 3, title: "c", labels: [{ name: "p1" }], assignee: null },
        { id: 4, title: "d", labels: [{ name: "p0" }], assignee: { login: "y" } },
      ],
      next: "c2",
    },
    { items: [{ id: 5, title: "e", labels: [], assignee: { login: "z" } }] },
  ];
  return {
    github: {
      async listIssues({ cursor }) {
        return pages[cursor === undefined ? 0 : cursor === "c1" ? 1 : 2];
      },
    },
  };
}

// Line-number check cell: throws on line 12 (after an interface, an enum, a
// type alias, satisfies/as) or on the last line, depending on global `which`.
const LINE_CELL = `interface Opts {
  name: string;
  retries?: number;
}
enum Mode { A, B }
type Pair<T> = [T, T];

const opts: Opts = { name: "x" } satisfies Opts;
const pair: Pair<number> = [1, 2] as Pair<number>;
const mode: Mode = Mode.B;
// the next line is line 12
if (which === 12) throw new Error("line-12");
function id<T>(v: T): T {
  return v;
}
interface Later<
  A,
  B extends string = "b",
> {
  a: A;
  b: B;
}
const later = id<Later<number>>({ a: 1, b: "b" });

const n = opts.retries ?? (pair[0] as number) + mode + later.a;
if (which === 27) throw new Error("line-27 " + n);
return n;`;

const SYNTAX_ERROR_INPUTS = ["const x: number = ;", "let y = <T>(a: T) => a; let z = {"];

const IMPORT_CASES = [
  { name: "import x (unused)", code: 'import x from "y";' },
  { name: "import x (used)", code: 'import x from "y";\nconsole.log(x);' },
  { name: "import type", code: 'import type { T } from "y";\nlet v: T;' },
  { name: "export const", code: "export const a = 1;" },
  { name: "await", code: "const r = await fetchThing();" },
  { name: "return", code: "return 42;" },
];

// ---------------------------------------------------------------------------
// The options. load() is what gets timed as "import"; transform() returns JS
// text or throws; raw() returns/throws exactly what the library does.
// ---------------------------------------------------------------------------
function amaroSpecifier() {
  if (process.env.AMARO_PATH) return pathToFileURL(path.join(process.env.AMARO_PATH, "dist", "index.js")).href;
  try {
    return pathToFileURL(require.resolve("amaro")).href;
  } catch {
    return null;
  }
}

const OPTIONS = {
  typescript: {
    pkg: "typescript",
    api: "ts.transpileModule(src, { reportDiagnostics: true, compilerOptions: { target: ESNext, module: ESNext } })",
    available: () => resolves("typescript"),
    load: async () => (await import("typescript")).default,
    raw(ts, src) {
      return ts.transpileModule(src, {
        fileName: "cell.ts",
        reportDiagnostics: true,
        compilerOptions: { target: ts.ScriptTarget.ESNext, module: ts.ModuleKind.ESNext },
      });
    },
    transform(ts, src) {
      const r = this.raw(ts, src);
      // transpileModule never throws: it is error-tolerant and returns output
      // plus syntactic diagnostics, which must be checked.
      if (r.diagnostics.length) {
        const d = r.diagnostics[0];
        const { line, character } = ts.getLineAndCharacterOfPosition(d.file, d.start);
        throw locError(ts.flattenDiagnosticMessageText(d.messageText, "\n"), line + 1, character);
      }
      return r.outputText;
    },
    describeError(ts, r) {
      return r.diagnostics.map((d) => {
        const { line, character } = ts.getLineAndCharacterOfPosition(d.file, d.start);
        return {
          code: d.code,
          category: d.category,
          messageText: d.messageText,
          start: d.start,
          length: d.length,
          file: d.file ? `<SourceFile ${d.file.fileName}>` : undefined,
          "(via ts.getLineAndCharacterOfPosition, 0-based)": { line, character },
        };
      });
    },
    loc: (e) => e?.loc ?? null, // set by transform() above: 1-based line, 0-based column
  },
  sucrase: {
    pkg: "sucrase",
    api: "sucrase.transform(src, { transforms: ['typescript'], disableESTransforms: true })",
    available: () => resolves("sucrase"),
    load: async () => await import("sucrase"),
    raw: (m, src) => m.transform(src, { transforms: ["typescript"], disableESTransforms: true }),
    transform(m, src) {
      return this.raw(m, src).code;
    },
    loc: (e) => (e?.loc ? { line: e.loc.line, column: e.loc.column } : null), // NB: sucrase column is 1-based
  },
  esbuild: {
    pkg: "esbuild",
    api: "esbuild.transformSync(src, { loader: 'ts' })",
    available: () => resolves("esbuild"),
    load: async () => await import("esbuild"),
    raw: (m, src) => m.transformSync(src, { loader: "ts" }),
    transform(m, src) {
      return this.raw(m, src).code;
    },
    loc: (e) => {
      const l = e?.errors?.[0]?.location;
      return l ? { line: l.line, column: l.column } : null;
    },
  },
  "amaro-strip": {
    pkg: "amaro",
    api: "amaro.transformSync(src, { mode: 'strip-only' })",
    available: () => amaroSpecifier() !== null,
    load: async () => (await import(amaroSpecifier())).default,
    raw: (m, src) => m.transformSync(src, { mode: "strip-only" }),
    transform(m, src) {
      return this.raw(m, src).code;
    },
    benchInput: stripEnum,
    loc: (e) => (e && typeof e === "object" && "startLine" in e ? { line: e.startLine, column: e.startColumn } : null),
  },
  "amaro-transform": {
    pkg: "amaro",
    api: "amaro.transformSync(src, { mode: 'transform' })",
    available: () => amaroSpecifier() !== null,
    load: async () => (await import(amaroSpecifier())).default,
    raw: (m, src) => m.transformSync(src, { mode: "transform" }),
    transform(m, src) {
      return this.raw(m, src).code;
    },
    loc: (e) => (e && typeof e === "object" && "startLine" in e ? { line: e.startLine, column: e.startColumn } : null),
  },
};

function resolves(spec) {
  try {
    require.resolve(spec);
    return true;
  } catch {
    return false;
  }
}

function locError(message, line, column) {
  const e = new SyntaxError(message);
  e.loc = { line, column };
  return e;
}

function pkgVersion(name) {
  try {
    if (name === "amaro") {
      const dir = process.env.AMARO_PATH ?? path.dirname(path.dirname(require.resolve("amaro")));
      return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
    }
    let dir = path.dirname(require.resolve(name));
    while (!fs.existsSync(path.join(dir, "package.json")) || JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).name !== name) {
      dir = path.dirname(dir);
    }
    return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
  } catch {
    return "?";
  }
}

// RSS of descendant processes (esbuild runs a Go service subprocess which
// process.memoryUsage() does not see). Linux /proc only; null elsewhere.
function descendantRssBytes() {
  try {
    const seen = new Set();
    const stack = [process.pid];
    let total = 0;
    while (stack.length) {
      const pid = stack.pop();
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
        const kids = fs.readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
        for (const k of kids ? kids.split(/\s+/).map(Number) : []) {
          if (seen.has(k)) continue;
          seen.add(k);
          stack.push(k);
          const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${k}/status`, "utf8"));
          if (m) total += Number(m[1]) * 1024;
        }
      }
    }
    return total;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------
// Child side: measure one option.
// ---------------------------------------------------------------------------
async function measure(name, iterations, withChecks) {
  const opt = OPTIONS[name];
  const input = opt.benchInput ?? ((s) => s);
  globalThis.gc?.();
  const mem0 = process.memoryUsage();

  const t0 = performance.now();
  const mod = await opt.load();
  const t1 = performance.now();
  const mem1 = process.memoryUsage();

  const firstOut = opt.transform(mod, wrap(input(benchCell(50))));
  const t2 = performance.now();
  const mem2 = process.memoryUsage();

  const times = [];
  for (let i = 0; i < iterations; i++) {
    const src = wrap(input(benchCell(51 + i)));
    const s = performance.now();
    opt.transform(mod, src);
    times.push(performance.now() - s);
  }
  globalThis.gc?.();
  const mem3 = process.memoryUsage();
  const sub = descendantRssBytes();

  const sorted = [...times].sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
  const result = {
    name,
    importMs: t1 - t0,
    firstMs: t2 - t1,
    p50: pct(0.5),
    p99: pct(0.99),
    mean: times.reduce((a, b) => a + b, 0) / times.length,
    rssLoad: mem1.rss - mem0.rss,
    rssFirst: mem2.rss - mem0.rss,
    rssEnd: mem3.rss - mem0.rss,
    heapEnd: mem3.heapUsed - mem0.heapUsed,
    subRss: sub,
    runOk: await runsCorrectly(firstOut),
  };
  if (withChecks) result.checks = await checks(name, opt, mod);
  return result;
}

async function runInVm(js, globals) {
  const ctx = vm.createContext({ console: { log() {} }, ...globals });
  const fn = vm.runInContext(`${js}\n;__cell`, ctx, { filename: "cell.js" });
  return await fn();
}

async function runsCorrectly(js) {
  try {
    const r = await runInVm(js, { tools: makeTools() });
    return JSON.stringify(r) === EXPECTED_RESULT ? "ok" : `WRONG ${JSON.stringify(r)}`;
  } catch (e) {
    return `FAIL ${String(e?.message ?? e).split("\n")[0]}`;
  }
}

function shapeOf(e) {
  if (e === null || typeof e !== "object") return { typeof: typeof e, value: e };
  const own = {};
  for (const k of Object.getOwnPropertyNames(e)) if (k !== "stack") own[k] = e[k];
  return { ctor: e.constructor?.name, instanceofError: e instanceof Error, ...own };
}

async function checks(name, opt, mod) {
  const out = { syntaxErrors: [], lines: [], imports: [] };

  // 1. syntax error shapes, for the raw input and (normalised) for the wrapped input
  for (const src of SYNTAX_ERROR_INPUTS) {
    const entry = { input: src };
    try {
      const r = opt.raw(mod, src);
      if (name === "typescript") {
        entry.threw = false;
        entry.outputText = r.outputText;
        entry.diagnostics = opt.describeError(mod, r);
      } else {
        entry.threw = false;
        entry.output = r.code;
      }
    } catch (e) {
      entry.threw = true;
      entry.shape = shapeOf(e);
    }
    try {
      opt.transform(mod, wrap(src));
      entry.wrapped = "no error";
    } catch (e) {
      const l = opt.loc(e);
      entry.wrapped = l ? { line: l.line, column: l.column, columnMinusPrefix: l.column - PREFIX.length } : "no structured location";
    }
    out.syntaxErrors.push(entry);
  }

  // 2. line preservation
  const src = opt.benchInput ? opt.benchInput(LINE_CELL).replace("enum Mode { A, B }", "const Mode = { A: 0, B: 1 } as const; type Mode = 0 | 1;") : LINE_CELL;
  let js;
  try {
    js = opt.transform(mod, wrap(src));
  } catch (e) {
    out.lines.push({ error: String(e?.message ?? e) });
  }
  if (js !== undefined) {
    out.lineCount = { ts: wrap(src).split("\n").length, js: js.replace(/\n$/, "").split("\n").length };
    for (const which of [12, 27]) {
      const expected = src.split("\n").findIndex((l) => l.includes(`"line-${which}`)) + 1;
      let got = null;
      try {
        await runInVm(js, { which });
        got = "did not throw";
      } catch (e) {
        const m = /cell\.js:(\d+):(\d+)/.exec(e?.stack ?? "");
        got = m ? Number(m[1]) : `no location: ${e?.message}`;
      }
      out.lines.push({ expected, got, ok: got === expected });
    }
  }

  // 3. import / export / await, at module top level and wrapped in the cell function
  for (const c of IMPORT_CASES) {
    const row = { case: c.name };
    for (const [k, text] of [
      ["topLevel", c.code],
      ["wrapped", wrap(c.code)],
    ]) {
      try {
        row[k] = opt.transform(mod, text).trim();
      } catch (e) {
        const l = opt.loc(e);
        const msg =
          String(e?.message ?? e)
            .split("\n")
            .filter(Boolean)[0] ?? "";
        row[k] = `ERROR${l ? ` @${l.line}:${l.column}` : ""}: ${msg.trim()}`;
      }
    }
    out.imports.push(row);
  }
  return out;
}

async function childMain(argv) {
  const name = argv[argv.indexOf("--child") + 1];
  const iterations = Number(argv[argv.indexOf("--iterations") + 1]);
  const withChecks = argv.includes("--checks");
  let result;
  if (argv.includes("--worker")) {
    result = await new Promise((resolve, reject) => {
      const w = new Worker(SELF, { workerData: { __tsBench: true, name, iterations, withChecks } });
      w.once("message", resolve);
      w.once("error", reject);
    });
  } else {
    result = await measure(name, iterations, withChecks);
  }
  process.stdout.write(`\n@@RESULT@@${JSON.stringify(result)}\n`);
  process.exit(0); // esbuild's service worker would otherwise be torn down lazily
}

// ---------------------------------------------------------------------------
// Parent side: spawn children, aggregate, print.
// ---------------------------------------------------------------------------
const median = (xs) => {
  const s = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const MB = (b) => (b === null ? "n/a" : (b / 1048576).toFixed(1));
const ms = (x) => (x === null ? "n/a" : x < 10 ? x.toFixed(3) : x.toFixed(1));

function table(header, rows) {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r) => `| ${r.map((c, i) => (i === 0 ? String(c).padEnd(w[i]) : String(c).padStart(w[i]))).join(" | ")} |`;
  return [line(header), `|${w.map((x) => "-".repeat(x + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

async function parentMain(argv) {
  const arg = (k, d) => (argv.includes(k) ? argv[argv.indexOf(k) + 1] : d);
  const runs = Number(arg("--runs", 5));
  const iterations = Number(arg("--iterations", 200));
  const inWorker = argv.includes("--worker");
  const only = arg("--only", null)?.split(",");
  const names = Object.keys(OPTIONS).filter((n) => (!only || only.includes(n)) && OPTIONS[n].available());
  const skipped = Object.keys(OPTIONS).filter((n) => !names.includes(n) && (!only || only.includes(n)));

  const results = Object.fromEntries(names.map((n) => [n, []]));
  for (let run = 0; run < runs; run++) {
    for (const n of names) {
      const args = ["--expose-gc", SELF, "--child", n, "--iterations", String(iterations)];
      if (run === 0) args.push("--checks");
      if (inWorker) args.push("--worker");
      const p = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 64 << 20 });
      const m = /@@RESULT@@(.*)/.exec(p.stdout ?? "");
      if (!m) {
        console.error(`child ${n} failed (status ${p.status}):\n${p.stderr}`);
        process.exitCode = 1;
        continue;
      }
      results[n].push(JSON.parse(m[1]));
    }
  }

  console.log(`\n=== TS -> JS transform for guest cells: cold load + per-cell cost ===`);
  console.log(
    `node ${process.version} ${process.platform}/${process.arch}; ${runs} fresh child process(es) per option; ` +
      `${iterations} warm transforms; measured in ${inWorker ? "a worker_thread" : "the main thread"} of the child.`,
  );
  console.log(`Input: ${wrap(benchCell()).split("\n").length}-line cell wrapped as ${JSON.stringify(PREFIX)} + cell + ${JSON.stringify(SUFFIX)}.`);
  console.log(`Columns are medians over the runs. "import" = await import(pkg); "1st" = first transform after import;`);
  console.log(`p50/p99/mean over the ${iterations} further transforms; RSS/heap deltas vs. just before the import`);
  console.log(`("end" = after all transforms + gc); "subproc RSS" = RSS of child processes (esbuild's Go service).\n`);

  const header = [
    "option",
    "version",
    "import ms",
    "1st ms",
    "p50 ms",
    "p99 ms",
    "mean ms",
    "RSS Δ import MB",
    "RSS Δ 1st MB",
    "RSS Δ end MB",
    "heap Δ end MB",
    "subproc RSS MB",
    "output runs",
  ];
  const rows = names
    .filter((n) => results[n].length)
    .map((n) => {
      const rs = results[n];
      const med = (k) => median(rs.map((r) => r[k]));
      return [
        n + (OPTIONS[n].benchInput ? " *" : ""),
        pkgVersion(OPTIONS[n].pkg),
        ms(med("importMs")),
        ms(med("firstMs")),
        ms(med("p50")),
        ms(med("p99")),
        ms(med("mean")),
        MB(med("rssLoad")),
        MB(med("rssFirst")),
        MB(med("rssEnd")),
        MB(med("heapEnd")),
        MB(med("subRss")),
        rs[0].runOk,
      ];
    });
  console.log(table(header, rows));
  if (names.some((n) => OPTIONS[n].benchInput)) console.log("* strip-only rejects enums: timed on the same cell with the enum replaced by a const object.");
  if (skipped.length) console.log(`skipped (not installed): ${skipped.join(", ")}`);
  console.log("\nAPI used per option:");
  for (const n of names) console.log(`  ${n.padEnd(16)} ${OPTIONS[n].api}`);

  const checksOf = (n) => results[n][0]?.checks;

  console.log(
    `\n=== Syntax errors (exact shape for the raw input; location for the wrapped input, column on line 1 includes the ${PREFIX.length}-char prefix) ===`,
  );
  for (const n of names) {
    const c = checksOf(n);
    if (!c) continue;
    console.log(`\n--- ${n} ---`);
    for (const e of c.syntaxErrors) {
      console.log(`input: ${e.input}`);
      console.log(`  threw: ${e.threw}`);
      const body = e.threw ? e.shape : n === "typescript" ? { outputText: e.outputText, diagnostics: e.diagnostics } : { output: e.output };
      console.log(
        JSON.stringify(body, null, 2)
          .split("\n")
          .map((l) => `  ${l}`)
          .join("\n"),
      );
      console.log(`  wrapped -> ${JSON.stringify(e.wrapped)}`);
    }
  }

  console.log(
    "\nColumn bases: typescript character 0-based (line 0-based); sucrase loc.column 1-based; esbuild location.column 0-based; amaro startColumn 0-based. Lines are 1-based except typescript.",
  );
  console.log("A wrapped error past the cell's last line (e.g. unexpected EOF) lands on the SUFFIX line (cell lines + 1).");

  console.log(`\n=== Line preservation (throw on line N of the TS cell; line of the throw in the emitted JS, no source map) ===`);
  console.log(
    table(
      ["option", "TS lines", "JS lines", "throw @12 ->", "throw @27 ->", "preserved"],
      names.filter(checksOf).map((n) => {
        const c = checksOf(n);
        if (c.lines[0]?.error) return [n, "-", "-", "transform error", c.lines[0].error.split("\n")[0].slice(0, 60), "n/a"];
        return [n, c.lineCount.ts, c.lineCount.js, c.lines[0].got, c.lines[1].got, c.lines.every((l) => l.ok) ? "YES" : "NO"];
      }),
    ),
  );

  console.log(`\n=== import / export / await / return: module top level vs. wrapped in the cell function ===`);
  for (const n of names) {
    const c = checksOf(n);
    if (!c) continue;
    console.log(`\n--- ${n} ---`);
    for (const r of c.imports) {
      const fmt = (s) => JSON.stringify(s.replace(/\s*\n\s*/g, " ⏎ "));
      console.log(`  ${r.case.padEnd(18)} top-level: ${fmt(r.topLevel)}`);
      console.log(`  ${"".padEnd(18)} wrapped:   ${fmt(r.wrapped)}`);
    }
  }
}

// ---------------------------------------------------------------------------
if (!isMainThread && workerData?.__tsBench) {
  const { name, iterations, withChecks } = workerData;
  parentPort.postMessage(await measure(name, iterations, withChecks));
} else if (process.argv.includes("--child")) {
  await childMain(process.argv);
} else {
  await parentMain(process.argv.slice(2));
}
