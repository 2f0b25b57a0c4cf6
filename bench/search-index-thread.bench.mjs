// What a catalog version's search index costs the sidecar's MAIN thread, at 2,000 tools
// (bench/lib/catalog.mjs): "main" builds it in place at the first search (as before the
// index worker: RunCatalog with no prepareIndex), "worker" builds it on the index worker
// thread when the version arrives (RunCatalog.prepareIndex, src/sandbox/catalog/index-builder.ts)
// and counts the main thread's share: making the docs, sending them, receiving the index
// (receiveMessageOnPort, so deserialising is included) and rebuilding it from plain data.
// Also the longest main-thread stall seen by a 1 ms timer while the index is built (what an
// exec arriving meanwhile waits), and a check that both indexes answer alike.
// Usage: npm run build && node bench/search-index-thread.bench.mjs [--rounds 7] [--size 2000]
import { parseArgs } from "node:util";
import { RunCatalog } from "../dist/sandbox/catalog/run-catalog.js";
import { sharedIndexBuilder } from "../dist/sandbox/catalog/index-builder.js";
import { largeCatalog } from "./lib/catalog.mjs";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "7" }, size: { type: "string", default: "2000" } } });
const ROUNDS = Number(values.rounds);
const { tools, mcpServers } = largeCatalog(Number(values.size));
const SOURCES = { 1: "openclaw", 2: "mcp", 3: "client" };
const entries = tools.map((t) => {
  const source = SOURCES[t.source] ?? "openclaw";
  const sourceName = t.sourceName ?? "core";
  return {
    id: `${source}:${sourceName}:${t.name}`,
    name: t.name,
    label: t.label ?? "",
    description: t.description,
    source,
    sourceName,
    parametersJson: t.parametersJson,
    outputSchemaJson: "",
    annotations: {},
    examplesJson: [],
    keywords: [],
  };
});
const servers = mcpServers.map((s) => ({ ...s, instructions: "", resources: false, prompts: false, aliases: [] }));
const QUERIES = ["create a github issue", "send a slack message", "list files in a directory", "search the web", "read a file", "query the database"];

/** Runs `f` (which resolves when the index is ready) while a 1 ms timer measures the longest main-thread stall. */
async function withStallMeter(f) {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 1);
  await new Promise((r) => setTimeout(r, 5));
  last = performance.now();
  worst = 0;
  const out = await f();
  await new Promise((r) => setTimeout(r, 3));
  clearInterval(timer);
  return { ...out, stallMs: worst };
}

async function onMain(round) {
  const c = new RunCatalog(`main-${round}`, entries, servers);
  let info;
  c.onIndexBuilt = (b) => (info = b);
  return withStallMeter(async () => {
    c.search("warm up the index", 5);
    return { info, catalog: c };
  });
}

async function onWorker(round) {
  const c = new RunCatalog(`worker-${round}`, entries, servers);
  let info;
  c.onIndexBuilt = (b) => (info = b);
  return withStallMeter(async () => {
    c.prepareIndex();
    await c.indexReady();
    return { info, catalog: c };
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x) => x.toFixed(1);
const rows = { main: [], worker: [] };
let same = true;
for (let r = 0; r < ROUNDS; r++) {
  const m = await onMain(r);
  const w = await onWorker(r);
  rows.main.push(m);
  rows.worker.push(w);
  for (const q of QUERIES) if (JSON.stringify(m.catalog.search(q, 10)) !== JSON.stringify(w.catalog.search(q, 10))) same = false;
}
console.log(`Catalog: ${entries.length} tools, ${servers.length} MCP servers; ${ROUNDS} rounds, first (cold) / median.`);
console.log("| index built | thread | build ms | main-thread ms | longest main-thread stall ms |");
console.log("| --- | --- | --- | --- | --- |");
for (const [name, rs] of Object.entries(rows)) {
  const col = (f) => `${fmt(f(rs[0]))} / ${fmt(median(rs.map(f)))}`;
  console.log(
    `| ${name === "main" ? "in place, at the first search (before)" : "on the index worker, when the version arrives (after)"} | ${rs[0].info.thread} | ${col((x) => x.info.buildMs)} | ${col((x) => x.info.mainThreadMs)} | ${col((x) => x.stallMs)} |`,
  );
}
console.log(`Same results for ${QUERIES.length} queries: ${same ? "yes" : "NO"}`);
await sharedIndexBuilder.close();
