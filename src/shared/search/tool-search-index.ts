/**
 * Relevance search over a tool catalog for `tools.search(query)`: a field-weighted
 * BM25 (BM25F) built once per catalog version, off the exec path, and shared by every
 * surface. Fields: the tool's name (identifier split), its server (name, title,
 * aliases), label, description, parameter names, parameter descriptions and enum
 * values, aliases/keywords, and the server's description. On top of word overlap: a
 * per-server vocabulary score (a query using words a server's tools use favours that
 * server), the query's verb against the tool's (list vs create vs delete…), a small
 * bonus for a word found in the name exactly as written, and argument-like words
 * (times, numbers, quoted text, file names) counting less. Every (term, tool)
 * contribution is precomputed, so a search only adds up a few posting lists. No fuzzy
 * or prefix matching in search (they flood results with noise), except a prefix
 * fallback for a query word that matches nothing; typo tolerance lives in `suggest`,
 * for "did you mean" on unknown ids and names.
 */
import { allowedEdits, editDistance } from "./fuzzy.js";
import { schemaText } from "./schema-text.js";
import { Intent, queryIntent, toolIntent } from "./intent.js";
import { joinedPairs, queryWords, splitWords, terms } from "./tokenize.js";

export type SearchDoc = {
  id: string;
  name: string;
  label?: string;
  description: string;
  source: "openclaw" | "mcp" | "client";
  sourceName: string;
  parametersJson: string;
  serverTitle?: string;
  serverDescription?: string;
  serverAliases?: readonly string[];
  aliases?: readonly string[];
  keywords?: readonly string[];
};

const FIELDS = ["name", "server", "label", "description", "paramNames", "paramDetails", "keywords", "serverDescription"] as const;
export type SearchField = (typeof FIELDS)[number];

export type SearchTuning = {
  /** How much one occurrence in each field counts, relative to the description. */
  weights: Record<SearchField, number>;
  /** BM25 length normalisation per field (0: none, 1: full). */
  b: Record<SearchField, number>;
  /** BM25 term-frequency saturation. */
  k1: number;
  /** Weight of the per-server vocabulary score added to the server's tools that match the query. */
  serverVocabulary: number;
  /** Weight of a prefix match used when a query word matches no term at all. */
  prefixFallback: number;
  /** Score factor when the query's verb matches the tool's (list/create/update/delete), and when it contradicts it. */
  intentMatch: number;
  intentMismatch: number;
  /** Extra score share for each query word found in the tool's name exactly as written ("boards" in list_boards). */
  exactName: number;
};

/** Tuned on the tuning half of bench/fixtures/search-queries.json (see bench/search-quality.bench.mjs). */
export const DEFAULT_TUNING: SearchTuning = {
  weights: { name: 3, server: 2.5, label: 2, description: 0.5, paramNames: 0.2, paramDetails: 0.6, keywords: 2, serverDescription: 0.3 },
  b: { name: 0.9, server: 0, label: 0.3, description: 0.75, paramNames: 0.5, paramDetails: 0.75, keywords: 0.3, serverDescription: 0.75 },
  k1: 0.6,
  serverVocabulary: 0.15,
  prefixFallback: 0.5,
  intentMatch: 1,
  intentMismatch: 0.8,
  exactName: 0.3,
};

const MAX_QUERY_CHARS = 256;
const MAX_QUERY_TERMS = 32;
const CAP = { name: 200, label: 200, description: 4_000, server: 1_000, list: 32, item: 100 } as const;

type Postings = { docs: Int32Array; scores: Float32Array };

const cut = (s: string | undefined, n: number): string => (s ? (s.length > n ? s.slice(0, n) : s) : "");
const list = (xs: readonly string[] | undefined): string =>
  Array.isArray(xs) ? xs.slice(0, CAP.list).map((x) => cut(typeof x === "string" ? x : "", CAP.item)).join(" ") : "";

/** Field texts of one tool, capped against hostile catalogs. */
function fieldTexts(d: SearchDoc): Record<SearchField, string> {
  const params = schemaText(typeof d.parametersJson === "string" ? d.parametersJson : "");
  return {
    name: cut(d.name, CAP.name),
    server: `${cut(d.sourceName, CAP.item)} ${cut(d.serverTitle, CAP.item)} ${list(d.serverAliases)}`,
    label: cut(d.label, CAP.label),
    description: cut(d.description, CAP.description),
    paramNames: params.names,
    paramDetails: params.details,
    keywords: `${list(d.aliases)} ${list(d.keywords)}`,
    serverDescription: cut(d.serverDescription, CAP.server),
  };
}

function count(ts: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const t of ts) m.set(t, (m.get(t) ?? 0) + 1);
  return m;
}

function idf(n: number, df: number): number {
  return Math.log(1 + (n - df + 0.5) / (df + 0.5));
}

/** Posting lists of (doc, precomputed contribution) from per-doc weighted term frequencies. */
function toPostings(perDoc: readonly Map<string, number>[], k1: number): Map<string, Postings> {
  const acc = new Map<string, { docs: number[]; tf: number[] }>();
  perDoc.forEach((tfs, i) => {
    for (const [t, tf] of tfs) {
      let p = acc.get(t);
      if (!p) acc.set(t, (p = { docs: [], tf: [] }));
      p.docs.push(i);
      p.tf.push(tf);
    }
  });
  const out = new Map<string, Postings>();
  for (const [t, p] of acc) {
    const w = idf(perDoc.length, p.docs.length);
    const scores = new Float32Array(p.tf.length);
    for (let j = 0; j < p.tf.length; j++) scores[j] = (w * p.tf[j]! * (k1 + 1)) / (k1 + p.tf[j]!);
    out.set(t, { docs: Int32Array.from(p.docs), scores });
  }
  return out;
}

export class ToolSearchIndex {
  private readonly ids: string[];
  private readonly names: string[];
  private readonly postings: Map<string, Postings>;
  private readonly vocabulary: string[];
  private readonly serverMembers: Int32Array[];
  private readonly serverPostings: Map<string, Postings>;
  private readonly tuning: SearchTuning;
  private readonly scores: Float64Array;
  private readonly serverScores: Float64Array;
  private readonly touched: Uint8Array;
  private readonly intents: Uint8Array;
  private readonly nameWords: ReadonlyArray<ReadonlySet<string>>;

  constructor(docs: readonly SearchDoc[], tuning: SearchTuning = DEFAULT_TUNING) {
    this.tuning = tuning;
    const n = docs.length;
    this.ids = docs.map((d) => String(d.id));
    this.names = docs.map((d) => cut(String(d.name), CAP.name));
    this.intents = Uint8Array.from(this.names, (nm) => toolIntent(nm));
    this.nameWords = this.names.map((nm) => new Set(splitWords(nm)));
    const serverKeys = docs.map((d) => `${d.source}:${String(d.sourceName)}`);

    // Per-field term counts and lengths.
    const fieldTerms: Map<string, number>[][] = [];
    const lengths = FIELDS.map(() => new Float64Array(n));
    docs.forEach((d, i) => {
      const texts = fieldTexts(d);
      fieldTerms.push(
        FIELDS.map((f, fi) => {
          const ts = terms(texts[f], true);
          lengths[fi]![i] = ts.length;
          return count(ts);
        }),
      );
    });
    const avg = lengths.map((ls) => Math.max(1, ls.reduce((a, b) => a + b, 0) / Math.max(1, n)));

    // BM25F: one weighted, length-normalised term frequency per (term, tool).
    const perDoc = fieldTerms.map((fields, i) => {
      const tfs = new Map<string, number>();
      fields.forEach((counts, fi) => {
        const f = FIELDS[fi]!;
        const w = tuning.weights[f];
        if (w === 0) return;
        const norm = 1 - tuning.b[f] + (tuning.b[f] * lengths[fi]![i]!) / avg[fi]!;
        for (const [t, c] of counts) tfs.set(t, (tfs.get(t) ?? 0) + (w * c) / norm);
      });
      return tfs;
    });
    this.postings = toPostings(perDoc, tuning.k1);
    this.vocabulary = [...this.postings.keys()].sort();

    // Per-server vocabulary: each server is one document made of its tools' names,
    // labels, descriptions, keywords and its own name and description.
    const serverIndex = new Map<string, number>();
    const members: number[][] = [];
    const serverTfs: Map<string, number>[] = [];
    serverKeys.forEach((key, i) => {
      let s = serverIndex.get(key);
      if (s === undefined) {
        serverIndex.set(key, (s = members.length));
        members.push([]);
        serverTfs.push(new Map());
      }
      members[s]!.push(i);
      const tfs = serverTfs[s]!;
      const fields = fieldTerms[i]!;
      for (const f of ["name", "server", "label", "description", "keywords"] as const) {
        for (const t of fields[FIELDS.indexOf(f)]!.keys()) tfs.set(t, (tfs.get(t) ?? 0) + 1);
      }
      if (members[s]!.length === 1) for (const t of fields[FIELDS.indexOf("serverDescription")]!.keys()) tfs.set(t, (tfs.get(t) ?? 0) + 1);
    });
    // Saturate by the share of the server's tools that use a term, so big servers do not win by size.
    const serverDocs = serverTfs.map((tfs, s) => {
      const size = members[s]!.length;
      const out = new Map<string, number>();
      for (const [t, c] of tfs) out.set(t, (3 * c) / (c + Math.max(1, size / 4)));
      return out;
    });
    this.serverPostings = toPostings(serverDocs, tuning.k1);
    this.serverMembers = members.map((m) => Int32Array.from(m));

    this.scores = new Float64Array(n);
    this.serverScores = new Float64Array(members.length);
    this.touched = new Uint8Array(n);
  }

  get size(): number {
    return this.ids.length;
  }

  /** Tool ids best first; an empty or stopword-only query finds nothing. */
  search(query: string, limit: number, filter?: (id: string) => boolean): string[] {
    if (typeof query !== "string" || !(limit > 0)) return [];
    const q = query.slice(0, MAX_QUERY_CHARS);
    const words = queryWords(q).slice(0, MAX_QUERY_TERMS);
    if (words.length === 0) return [];
    for (const j of joinedPairs(q)) {
      if (words.length < MAX_QUERY_TERMS && this.postings.has(j.term) && !words.some((w) => w.term === j.term)) words.push(j);
    }
    const { scores, serverScores, touched } = this;
    const hits: number[] = [];
    let weight = 1;
    const add = (docIdx: number, v: number): void => {
      if (!touched[docIdx]) {
        touched[docIdx] = 1;
        hits.push(docIdx);
      }
      scores[docIdx]! += v * weight;
    };
    const servers: number[] = [];
    const addServer = (t: string): void => {
      const sp = this.serverPostings.get(t);
      if (!sp) return;
      for (let j = 0; j < sp.docs.length; j++) {
        const s = sp.docs[j]!;
        if (serverScores[s] === 0) servers.push(s);
        serverScores[s]! += sp.scores[j]! * weight;
      }
    };
    const exact = words.filter((w) => w.surface !== w.term).map((w) => w.surface);
    const exactShare = this.tuning.exactName / words.length;
    for (const w of words) {
      weight = w.weight;
      if (w.expansion) {
        // An abbreviation counts once: the better of the word itself and what it stands for.
        this.addBest([[w.term], w.expansion], add);
        for (const t of w.expansion) addServer(t);
      } else {
        const p = this.postings.get(w.term);
        if (p) for (let j = 0; j < p.docs.length; j++) add(p.docs[j]!, p.scores[j]!);
        else this.prefixMatch(w.term, add);
      }
      addServer(w.term);
    }
    const sv = this.tuning.serverVocabulary;
    for (const s of servers) {
      const bonus = sv * serverScores[s]!;
      serverScores[s] = 0;
      // Only tools that matched some query word themselves get their server's bonus.
      for (const d of this.serverMembers[s]!) if (touched[d]) scores[d]! += bonus;
    }
    const qi = queryIntent(q);
    const { intentMatch, intentMismatch } = this.tuning;
    const ranked: Array<[number, number]> = [];
    for (const d of hits) {
      let sc = scores[d]!;
      scores[d] = 0;
      touched[d] = 0;
      const ti = this.intents[d]!;
      if (qi !== Intent.None && ti !== Intent.None) sc *= qi & ti ? intentMatch : intentMismatch;
      if (exact.length > 0) {
        const nw = this.nameWords[d]!;
        let k = 0;
        for (const e of exact) if (nw.has(e)) k++;
        sc *= 1 + k * exactShare;
      }
      if (sc > 0) ranked.push([d, sc]);
    }
    ranked.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
    // The scratch arrays are clean again before the filter runs: it may even search this index.
    if (filter) {
      const out: string[] = [];
      for (const [d] of ranked) {
        if (out.length >= limit) break;
        if (filter(this.ids[d]!)) out.push(this.ids[d]!);
      }
      return out;
    }
    return ranked.slice(0, Math.floor(limit)).map(([d]) => this.ids[d]!);
  }

  /** Adds, per tool, the best of several alternatives, each a sum over its terms. */
  private addBest(alternatives: ReadonlyArray<readonly string[]>, add: (docIdx: number, v: number) => void): void {
    const best = new Map<number, number>();
    for (const alt of alternatives) {
      const sum = new Map<number, number>();
      for (const t of alt) {
        const p = this.postings.get(t);
        if (p) for (let j = 0; j < p.docs.length; j++) sum.set(p.docs[j]!, (sum.get(p.docs[j]!) ?? 0) + p.scores[j]!);
      }
      for (const [d, v] of sum) if (v > (best.get(d) ?? 0)) best.set(d, v);
    }
    for (const [d, v] of best) add(d, v);
  }

  /** A query word unknown to the catalog: the terms it begins, at reduced weight, best per tool. */
  private prefixMatch(t: string, add: (docIdx: number, v: number) => void): void {
    if (t.length < 3 || this.tuning.prefixFallback === 0) return;
    const voc = this.vocabulary;
    let lo = 0;
    let hi = voc.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (voc[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    const best = new Map<number, number>();
    for (let i = lo, k = 0; i < voc.length && k < 16 && voc[i]!.startsWith(t); i++, k++) {
      const p = this.postings.get(voc[i]!)!;
      for (let j = 0; j < p.docs.length; j++) best.set(p.docs[j]!, Math.max(best.get(p.docs[j]!) ?? 0, p.scores[j]!));
    }
    for (const [d, v] of best) add(d, v * this.tuning.prefixFallback);
  }

  /**
   * "Did you mean": ids whose id or name is a few edits from `text` (a mistyped id such
   * as "openclaw:core:mesage" or a name such as "github_craete_issue"), closest first;
   * failing that, the best search hits for the words of its name part.
   */
  suggest(text: string, limit: number): string[] {
    if (typeof text !== "string" || !(limit > 0)) return [];
    const full = text.trim().toLowerCase().slice(0, 200);
    if (!full) return [];
    const namePart = full.slice(full.lastIndexOf(":") + 1);
    const scored: Array<[number, number]> = [];
    for (let i = 0; i < this.ids.length; i++) {
      const id = this.ids[i]!.toLowerCase();
      const name = this.names[i]!.toLowerCase();
      const dId = editDistance(full, id, allowedEdits(id.length));
      const dName = namePart ? editDistance(namePart, name, allowedEdits(name.length)) : Infinity;
      const d = Math.min(dId <= allowedEdits(id.length) ? dId : Infinity, dName <= allowedEdits(name.length) ? dName + 0.5 : Infinity);
      if (d !== Infinity) scored.push([i, d]);
    }
    scored.sort((a, b) => a[1] - b[1] || a[0] - b[0]);
    const out = scored.slice(0, Math.floor(limit)).map(([i]) => this.ids[i]!);
    if (out.length < limit) {
      for (const id of this.search(namePart || full, limit)) if (!out.includes(id) && out.length < limit) out.push(id);
    }
    return out;
  }
}

/** The first sentence of a description, at most `max` characters: what a model needs to choose. */
export function oneLine(description: string, max = 160): string {
  const flat = description.replace(/\s+/g, " ").trim();
  const m = /^(.+?[.!?])(\s|$)/.exec(flat);
  const s = m ? m[1]! : flat;
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
