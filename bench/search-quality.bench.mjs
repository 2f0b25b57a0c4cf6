// Search quality of tools.search on a realistic catalog: the real tool lists of public MCP
// servers (bench/fixtures/mcp-catalog.json, from scripts/build-search-fixture.mjs) plus
// hand-written gateway tools, padded to exactly 2,000 tools, against task-style queries
// whose right answers are known (bench/fixtures/search-queries.json, tune and held-out
// halves). Prints recall@1, recall@5, MRR@10, build time and search latency for our
// ToolSearchIndex next to two baselines in the same run: MiniSearch configured like
// run-catalog.ts before ToolSearchIndex, and a plain Okapi BM25 over the same concatenated text.
// Build time: the first build of each ranker in this process and the median of 3 (wall
// clock; the first ToolSearchIndex build runs its code cold, as at a sidecar's first resolve).
// Asserts nothing. Usage: npx tsc -p tsconfig.json && node bench/search-quality.bench.mjs
//   [--size 2000] [--reps 20] [--misses tune] [--misses-at 1|5] [--misses-of sd] [--tune-only] [--tuning '{"k1":1.5}'] [--only ToolSearchIndex]
// --misses-of sd prints the misses of the ranker with server descriptions (as run-catalog.ts indexes) instead of the plain one.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import MiniSearch from "minisearch";
import { DEFAULT_TUNING, ToolSearchIndex } from "../dist/sandbox/catalog/search/tool-search-index.js";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "2000" },
    reps: { type: "string", default: "20" },
    misses: { type: "string" },
    tuning: { type: "string" },
    only: { type: "string" },
    "tune-only": { type: "boolean", default: false },
    "misses-at": { type: "string", default: "5" },
    "misses-of": { type: "string", default: "plain" },
  },
});
const SIZE = Number(values.size);
const REPS = Number(values.reps);
const fixture = (name) => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

// ---- The catalog: gateway tools, then every MCP server's tools, padded to SIZE. ----
const mcp = fixture("mcp-catalog.json");
const gateway = fixture("gateway-tools.json");
const { queries } = fixture("search-queries.json");
const docs = [];
for (const t of gateway.tools) {
  docs.push({
    id: `openclaw:core:${t.name}`,
    name: t.name,
    label: t.label,
    description: t.description,
    source: "openclaw",
    sourceName: "core",
    parametersJson: JSON.stringify(t.parameters),
  });
}
const serverDescriptions = new Map();
for (const s of mcp.servers) {
  serverDescriptions.set(s.name, s.description ?? "");
  for (const t of s.tools) {
    const label = t.annotations?.title;
    const d = {
      id: `mcp:${s.name}:${t.name}`,
      name: t.name,
      description: t.description ?? "",
      source: "mcp",
      sourceName: s.name,
      parametersJson: JSON.stringify(t.inputSchema ?? {}),
    };
    if (typeof label === "string") d.label = label;
    docs.push(d);
  }
}
const realCount = docs.length;
let padded = 0;
if (docs.length > SIZE) docs.length = SIZE;
// Only if still short: deterministic copies of real servers under other names (a second account
// of the same product, as people do connect), taken largest server first.
const bySize = [...mcp.servers].sort((a, b) => b.tools.length - a.tools.length || (a.name < b.name ? -1 : 1));
for (let round = 2; docs.length < SIZE && round < 10; round++) {
  for (const s of bySize) {
    for (const t of s.tools) {
      if (docs.length >= SIZE) break;
      const server = `${s.name}-account${round}`;
      docs.push({
        id: `mcp:${server}:${t.name}`,
        name: t.name,
        description: t.description ?? "",
        source: "mcp",
        sourceName: server,
        parametersJson: JSON.stringify(t.inputSchema ?? {}),
      });
      padded++;
    }
    if (docs.length >= SIZE) break;
  }
}
const known = new Set(docs.map((d) => d.id));
for (const q of queries) for (const id of q.expect) if (!known.has(id)) throw new Error(`query ${JSON.stringify(q.q)} expects unknown id ${id}`);

// ---- Rankers. ----
function splitWords(text) {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0);
}
function parameterNames(parametersJson) {
  try {
    return Object.keys(JSON.parse(parametersJson).properties ?? {}).join(" ");
  } catch {
    return "";
  }
}

/** The previous ranking, configured exactly like src/sandbox/catalog/run-catalog.ts was before ToolSearchIndex. */
function miniSearchRanker(catalog) {
  const idx = new MiniSearch({
    fields: ["name", "label", "description", "params"],
    storeFields: [],
    tokenize: (text) => splitWords(text),
    searchOptions: { boost: { name: 3, label: 2, params: 1.5, description: 1 }, prefix: true, fuzzy: 0.2, combineWith: "OR" },
  });
  idx.addAll(catalog.map((e) => ({ id: e.id, name: e.name, label: e.label ?? "", description: e.description, params: parameterNames(e.parametersJson) })));
  return (q, limit) =>
    idx
      .search(q)
      .slice(0, limit)
      .map((h) => String(h.id));
}

/** Plain Okapi BM25 (k1 1.2, b 0.75) over the same text concatenated, no stopwords or stemming. */
function okapiRanker(catalog) {
  const k1 = 1.2;
  const b = 0.75;
  const docTerms = catalog.map((e) => splitWords(`${e.name} ${e.label ?? ""} ${e.description} ${parameterNames(e.parametersJson)}`));
  const avg = docTerms.reduce((a, t) => a + t.length, 0) / docTerms.length;
  const post = new Map();
  docTerms.forEach((ts, i) => {
    const tf = new Map();
    for (const t of ts) tf.set(t, (tf.get(t) ?? 0) + 1);
    for (const [t, c] of tf) {
      if (!post.has(t)) post.set(t, []);
      post.get(t).push([i, c]);
    }
  });
  const N = catalog.length;
  return (q, limit) => {
    const scores = new Map();
    for (const t of new Set(splitWords(q))) {
      const p = post.get(t);
      if (!p) continue;
      const idf = Math.log(1 + (N - p.length + 0.5) / (p.length + 0.5));
      for (const [i, c] of p) {
        const s = (idf * c * (k1 + 1)) / (c + k1 * (1 - b + (b * docTerms[i].length) / avg));
        scores.set(i, (scores.get(i) ?? 0) + s);
      }
    }
    return [...scores]
      .sort((x, y) => y[1] - x[1] || x[0] - y[0])
      .slice(0, limit)
      .map(([i]) => catalog[i].id);
  };
}

const tuning = values.tuning ? mergeTuning(DEFAULT_TUNING, JSON.parse(values.tuning)) : DEFAULT_TUNING;
function mergeTuning(base, over) {
  return { ...base, ...over, weights: { ...base.weights, ...(over.weights ?? {}) }, b: { ...base.b, ...(over.b ?? {}) } };
}
function oursRanker(catalog) {
  const idx = new ToolSearchIndex(catalog, tuning);
  return (q, limit) => idx.search(q, limit);
}
const withServerDescriptions = docs.map((d) =>
  d.source === "mcp" && serverDescriptions.get(d.sourceName) ? { ...d, serverDescription: serverDescriptions.get(d.sourceName) } : d,
);
const RANKERS = [
  { name: "MiniSearch (previous run-catalog.ts)", build: () => miniSearchRanker(docs) },
  { name: "Okapi BM25 (plain)", build: () => okapiRanker(docs) },
  { name: "ToolSearchIndex", build: () => oursRanker(docs), misses: "plain" },
  { name: "ToolSearchIndex + server descriptions (as run-catalog.ts indexes)", build: () => oursRanker(withServerDescriptions), misses: "sd" },
].filter((r) => !values.only || r.name.startsWith(values.only));

// ---- Measuring. ----
const now = () => Number(process.hrtime.bigint()) / 1e6;
const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
function quality(search, qs) {
  let r1 = 0;
  let r5 = 0;
  let mrr = 0;
  const misses = [];
  for (const q of qs) {
    const got = search(q.q, 10);
    const rank = got.findIndex((id) => q.expect.includes(id));
    if (rank === 0) r1++;
    if (rank >= 0 && rank < 5) r5++;
    if (rank >= 0) mrr += 1 / (rank + 1);
    if (rank < 0 || rank >= (values["misses-at"] === "1" ? 1 : 5)) misses.push({ q: q.q, expect: q.expect, got: got.slice(0, 5) });
  }
  return { r1: r1 / qs.length, r5: r5 / qs.length, mrr: mrr / qs.length, misses };
}
function latency(search, qs) {
  for (const q of qs) search(q.q, 5); // warm up
  const samples = [];
  for (let r = 0; r < REPS; r++) {
    for (const q of qs) {
      const t0 = now();
      search(q.q, 5);
      samples.push(now() - t0);
    }
  }
  return { p50: pct(samples, 50), p99: pct(samples, 99) };
}

const halves = { tune: queries.filter((q) => q.split === "tune"), heldout: queries.filter((q) => q.split === "heldout") };
// While tuning, the held-out half is not even measured.
if (values["tune-only"]) halves.heldout = [];
const pctf = (x) => `${(100 * x).toFixed(1)}%`;
const ms = (x) => (x < 0.1 ? x.toFixed(3) : x.toFixed(2));
const rows = [];
for (const r of RANKERS) {
  const builds = [];
  let search;
  for (let i = 0; i < 3; i++) {
    const t0 = now();
    search = r.build();
    builds.push(now() - t0);
  }
  for (const [half, qs] of Object.entries(halves)) {
    if (qs.length === 0) continue;
    const qy = quality(search, qs);
    const lat = latency(search, qs);
    rows.push(
      `| ${r.name} | ${half} (${qs.length}) | ${pctf(qy.r1)} | ${pctf(qy.r5)} | ${qy.mrr.toFixed(3)} | ${ms(builds[0])} / ${ms(pct(builds, 50))} | ${ms(lat.p50)} | ${ms(lat.p99)} |`,
    );
    if (values.misses === half && r.misses === values["misses-of"]) {
      for (const m of qy.misses) console.log(`MISS ${JSON.stringify(m.q)}\n  want ${m.expect.join(" | ")}\n  got  ${m.got.join("  ")}`);
    }
  }
}

const servers = mcp.servers.length;
console.log(
  `\nCatalog: ${docs.length} tools = ${gateway.tools.length} gateway tools + ${realCount - gateway.tools.length} real MCP tools from ${servers} npm server packages` +
    (padded ? ` + ${padded} padding tools (real tools of the largest servers copied under "<server>-accountN" names)` : "") +
    ".",
);
console.log(
  `Queries: ${queries.length} (${halves.tune.length} tune, ${halves.heldout.length} held-out); latency over ${REPS} repetitions of each half, limit 5; build = median of 3.\n`,
);
console.log("| ranker | half | recall@1 | recall@5 | MRR@10 | build ms (first / median) | p50 ms | p99 ms |");
console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
for (const row of rows) console.log(row);
