/**
 * The search index built off the main thread: the data round trip (build → plain data →
 * structured clone with transferred buffers → rebuild) answers every query exactly as
 * the index built in place; the index worker (dist/, so run `npm run build` first)
 * builds it on its thread; a worker that cannot start falls back to the main thread,
 * logged once; and a RunCatalog search made before the build is over waits for it.
 */
import { readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { buildIndex } from "../../src/sandbox/catalog/search/index-build.js";
import { fromWire, toWire } from "../../src/sandbox/catalog/search/index-wire.js";
import { DEFAULT_TUNING, ToolSearchIndex, type SearchDoc } from "../../src/sandbox/catalog/search/tool-search-index.js";
import { SearchIndexBuilder, SMALL_CATALOG_DOCS } from "../../src/sandbox/catalog/index-builder.js";
import { RunCatalog, type CatalogEntryData } from "../../src/sandbox/catalog/run-catalog.js";
import type { Logger } from "../../src/shared/logger.js";

type FixtureServer = { name: string; description?: string; tools: Array<{ name: string; description?: string; inputSchema?: unknown }> };
const fixture = <T>(name: string): T => JSON.parse(readFileSync(new URL(`../../bench/fixtures/${name}`, import.meta.url), "utf8")) as T;
const mcp = fixture<{ servers: FixtureServer[] }>("mcp-catalog.json");
const gateway = fixture<{ tools: Array<{ name: string; label?: string; description: string; parameters?: unknown }> }>("gateway-tools.json");
const { queries } = fixture<{ queries: Array<{ q: string }> }>("search-queries.json");

/** The search-quality bench's 2,000 tools (real MCP servers, padded with copies under other names). */
function docs(size = 2000): SearchDoc[] {
  const out: SearchDoc[] = gateway.tools.map((t) => ({
    id: `openclaw:core:${t.name}`,
    name: t.name,
    ...(t.label ? { label: t.label } : {}),
    description: t.description,
    source: "openclaw" as const,
    sourceName: "core",
    parametersJson: JSON.stringify(t.parameters ?? {}),
  }));
  for (let round = 1; out.length < size && round < 10; round++) {
    for (const s of mcp.servers) {
      const server = round === 1 ? s.name : `${s.name}-account${round}`;
      for (const t of s.tools) {
        if (out.length >= size) break;
        out.push({
          id: `mcp:${server}:${t.name}`,
          name: t.name,
          description: t.description ?? "",
          source: "mcp",
          sourceName: server,
          parametersJson: JSON.stringify(t.inputSchema ?? {}),
          ...(s.description ? { serverDescription: s.description } : {}),
          serverAliases: round === 1 ? [] : [s.name],
        });
      }
    }
  }
  return out;
}

const CATALOG = docs();
const QUERIES = [...queries.map((q) => q.q), "sub agent", "k8s pods", "githb isue", "xyzzy", "list", "a", "Create_Issue", "post to #general on slack at 5pm"];
const TYPOS = ["mcp:github:create_isue", "openclaw:core:mesage", "github_craete_issue", "list_comits", "nothing-like-it"];
const inPlace = new ToolSearchIndex(CATALOG);

function sameAnswers(other: ToolSearchIndex): void {
  const onlyMcp = (id: string) => id.startsWith("mcp:");
  for (const q of QUERIES) {
    expect(other.search(q, 10), q).toEqual(inPlace.search(q, 10));
    expect(other.search(q, 5, onlyMcp), q).toEqual(inPlace.search(q, 5, onlyMcp));
  }
  for (const t of TYPOS) expect(other.suggest(t, 5), t).toEqual(inPlace.suggest(t, 5));
}

function capture(): { log: Logger; warnings: string[]; infos: string[] } {
  const warnings: string[] = [];
  const infos: string[] = [];
  const log = { warn: (_o: unknown, msg: string) => warnings.push(msg), info: (_o: unknown, msg: string) => infos.push(msg) } as unknown as Logger;
  return { log, warnings, infos };
}

describe("index data round trip", () => {
  it("build → structured clone (buffers transferred) → rebuild answers like the index built in place", () => {
    expect(CATALOG.length).toBe(2000);
    const data = buildIndex(CATALOG, DEFAULT_TUNING);
    const { wire, transfer } = toWire(data);
    expect(transfer.length).toBeGreaterThanOrEqual(10);
    const received = structuredClone(wire, { transfer });
    // Transferred, not copied: the sender's arrays are detached.
    expect(wire.postings.docs.byteLength).toBe(0);
    expect(wire.nameTerms.values.byteLength).toBe(0);
    const rebuilt = fromWire(received);
    expect(rebuilt.dict.size).toBe(inPlaceTerms());
    expect(rebuilt.nameWordIds.size).toBe(buildIndex(CATALOG, DEFAULT_TUNING).nameWordIds.size);
    sameAnswers(ToolSearchIndex.fromData(rebuilt));
  });

  it("an empty catalog round-trips too", () => {
    const { wire, transfer } = toWire(buildIndex([], DEFAULT_TUNING));
    const index = ToolSearchIndex.fromData(fromWire(structuredClone(wire, { transfer })));
    expect(index.size).toBe(0);
    expect(index.search("create an issue", 5)).toEqual([]);
    expect(index.suggest("create_issue", 5)).toEqual([]);
  });
});

function inPlaceTerms(): number {
  return buildIndex(CATALOG, DEFAULT_TUNING).dict.size;
}

describe("SearchIndexBuilder", () => {
  const builder = new SearchIndexBuilder(new URL("../../dist/sandbox/catalog/search-index-worker.js", import.meta.url));
  afterAll(() => builder.close());

  it("builds on its worker thread (reused), costing the main thread a fraction of the build", async () => {
    const { log, warnings } = capture();
    const order: string[] = [];
    const building = Promise.all([builder.build(CATALOG, log), builder.build(CATALOG.slice(0, 500), log)]).then((built) => {
      order.push("built");
      return built;
    });
    // The main thread is free while the worker builds: its next turn comes before the indexes do.
    setImmediate(() => order.push("main thread turn"));
    const [a, b] = await building;
    expect(order).toEqual(["main thread turn", "built"]);
    expect(a.thread).toBe("worker");
    expect(b.thread).toBe("worker");
    expect(b.index.size).toBe(500);
    expect(a.buildMs).toBeGreaterThan(0);
    expect(warnings).toEqual([]);
    expect(builder.offMainThread).toBe(true);
    sameAnswers(a.index);
  });

  it("indexes a catalog of at most SMALL_CATALOG_DOCS tools in place, without starting a worker thread", async () => {
    // A builder whose worker file does not exist: starting it would fail and disable it.
    const idle = new SearchIndexBuilder(new URL("./no-such-worker.js", import.meta.url));
    const { log, warnings } = capture();
    const small = await idle.build(CATALOG.slice(0, SMALL_CATALOG_DOCS), log);
    expect(small.thread).toBe("main");
    expect(small.index.size).toBe(SMALL_CATALOG_DOCS);
    expect(warnings).toEqual([]);
    expect(idle.offMainThread).toBe(true);
    // One more tool and the worker is tried (here it cannot start: built in place, said once).
    expect((await idle.build(CATALOG.slice(0, SMALL_CATALOG_DOCS + 1), log)).thread).toBe("main");
    expect(idle.offMainThread).toBe(false);
  });

  it("falls back to the main thread when the worker cannot start, and says so once", async () => {
    const broken = new SearchIndexBuilder(new URL("./no-such-worker.js", import.meta.url));
    const { log, warnings } = capture();
    const first = await broken.build(CATALOG, log);
    const second = await broken.build(CATALOG.slice(0, 10), log);
    expect(first.thread).toBe("main");
    expect(second.thread).toBe("main");
    expect(first.mainThreadMs).toBe(first.buildMs);
    expect(warnings.filter((w) => /worker thread unavailable/.test(w))).toHaveLength(1);
    expect(broken.offMainThread).toBe(false);
    sameAnswers(first.index);
  });
});

describe("RunCatalog.prepareIndex", () => {
  const entries: CatalogEntryData[] = CATALOG.map((d) => ({
    id: d.id,
    name: d.name,
    label: d.label ?? "",
    description: d.description,
    source: d.source,
    sourceName: d.sourceName,
    parametersJson: d.parametersJson,
    outputSchemaJson: "",
    annotations: {},
    examplesJson: [],
    keywords: [],
  }));
  const builder = new SearchIndexBuilder(new URL("../../dist/sandbox/catalog/search-index-worker.js", import.meta.url));
  afterAll(() => builder.close());

  it("a search made while the index is built waits for it and answers as a catalog that built it in place", async () => {
    const lazy = new RunCatalog("v-lazy", entries);
    const early = new RunCatalog("v-early", entries);
    const built: Array<{ thread: string; mainThreadMs: number; buildMs: number }> = [];
    early.onIndexBuilt = (b) => built.push(b);
    early.prepareIndex(undefined, builder);
    const ready = early.indexReady();
    expect(ready).toBeInstanceOf(Promise);
    await ready;
    expect(early.indexReady()).toBeUndefined();
    expect(built).toHaveLength(1);
    expect(built[0]!.thread).toBe("worker");
    early.prepareIndex(undefined, builder); // once per catalog
    for (const q of QUERIES.slice(0, 60)) {
      expect(early.search(q, 5, "tool_search"), q).toEqual(lazy.search(q, 5, "tool_search"));
      expect(early.search(q, 5, "code"), q).toEqual(lazy.search(q, 5, "code"));
    }
    const miss = early.resolve("mcp:github:create_isue", "tool_search");
    expect(miss.ok ? "" : miss.message).toContain("mcp:github:create_issue");
    expect(built).toHaveLength(1);
    expect(lazy.indexBuildMs).toBeGreaterThan(0);
  });
});
