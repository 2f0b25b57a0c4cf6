/**
 * Relevance search over a tool catalog for `tools.search(query)`: a field-weighted BM25
 * (BM25F) built once per catalog version, off the exec path, and shared by every surface.
 * Fields: the tool's name (identifier split), its server (name, title, aliases), label,
 * description, parameter names, parameter descriptions and enum values, aliases/keywords,
 * and the server's description (./index-build.ts). On top of word overlap: synonyms of a
 * query's words (verbs above all) as alternatives, a per-server vocabulary score (a query
 * using words a server's tools use favours that server), argument-like words (times,
 * numbers, quoted text, file names, "called …", capitalised names no tool or server has)
 * counting less, and the ranking rules of ./rules.ts (verb, exact name or label word, name
 * coverage, a server named in full). Every (term, tool) contribution is precomputed, so a
 * search only adds up a few posting lists. Search never matches fuzzily or by prefix (noise
 * floods the results), except a prefix fallback for a query word that matches nothing; typo
 * tolerance lives in `suggest`, for "did you mean" on unknown ids and names.
 */
import { allowedEdits, editDistance } from "./fuzzy.js";
import { buildIndex, type IndexData, type SearchDoc } from "./index-build.js";
import { ARGUMENT_WEIGHT, properNouns } from "./phrases.js";
import { idf } from "./postings.js";
import { queryRules, ruleFactor } from "./rules.js";
import { joinedPairs, type QueryWord, queryWords } from "./tokenize.js";
import { DEFAULT_TUNING, type SearchTuning } from "./tuning.js";

export type { SearchDoc } from "./index-build.js";
export { DEFAULT_TUNING, type SearchField, type SearchTuning } from "./tuning.js";

const MAX_QUERY_CHARS = 256;
const MAX_QUERY_TERMS = 32;

type Add = (docIdx: number, v: number) => void;

/** The k first of `xs` in `cmp` order, sorted: one pass keeping a small sorted buffer. */
function topK(xs: readonly number[], k: number, cmp: (a: number, b: number) => number): number[] {
  const top: number[] = [];
  if (k <= 0) return top;
  for (const x of xs) {
    if (top.length === k && cmp(x, top[k - 1]!) >= 0) continue;
    let i = top.length === k ? k - 1 : top.length;
    while (i > 0 && cmp(x, top[i - 1]!) < 0) {
      top[i] = top[i - 1]!;
      i--;
    }
    top[i] = x;
  }
  return top;
}

export class ToolSearchIndex {
  private readonly data: IndexData;
  private readonly tuning: SearchTuning;
  private readonly scores: Float64Array;
  private readonly serverScores: Float64Array;
  private readonly touched: Uint8Array;
  /** Terms with postings, sorted, for the prefix fallback: made on first need. */
  private vocabulary: string[] | undefined;

  /** Builds the index of `docs`, or wraps `data` built elsewhere with the same tuning (a worker thread: index-wire.ts). */
  constructor(docs: readonly SearchDoc[], tuning: SearchTuning = DEFAULT_TUNING, data?: IndexData) {
    this.tuning = tuning;
    this.data = data ?? buildIndex(docs, tuning);
    this.scores = new Float64Array(this.data.ids.length);
    this.serverScores = new Float64Array(this.data.serverMembers.length);
    this.touched = new Uint8Array(this.data.ids.length);
  }

  /** An index over data `buildIndex` made with `tuning` (possibly on another thread). */
  static fromData(data: IndexData, tuning: SearchTuning = DEFAULT_TUNING): ToolSearchIndex {
    return new ToolSearchIndex([], tuning, data);
  }

  get size(): number {
    return this.data.ids.length;
  }

  /** Tool ids best first; an empty or stopword-only query finds nothing. */
  search(query: string, limit: number, filter?: (id: string) => boolean): string[] {
    if (!(limit > 0)) return [];
    const { hits, scores } = this.rank(query);
    const ids = this.data.ids;
    const better = (a: number, b: number): number => scores[b]! - scores[a]! || a - b;
    // Usually only the first few of many are wanted: select those (one pass), and sort the
    // rest only if the filter turns too many of them down.
    const k = Math.min(hits.length, Math.floor(limit) * (filter ? 2 : 1) + (filter ? 8 : 0));
    const order = hits.length > 4 * k && k <= 64 ? topK(hits, k, better) : hits.sort(better);
    const out: string[] = [];
    for (const d of order) {
      if (out.length >= limit) break;
      if (!filter || filter(ids[d]!)) out.push(ids[d]!);
    }
    if (filter && out.length < limit && order.length < hits.length) {
      const seen = new Set(order);
      for (const d of hits.filter((x) => !seen.has(x)).sort(better)) {
        if (out.length >= limit) break;
        if (filter(ids[d]!)) out.push(ids[d]!);
      }
    }
    return out;
  }

  /** Every tool that matches (unordered) and its final score, in a fresh array indexed by tool. */
  private rank(query: string): { hits: number[]; scores: Float64Array } {
    const none = { hits: [], scores: new Float64Array(0) };
    if (typeof query !== "string") return none;
    const q = query.slice(0, MAX_QUERY_CHARS);
    const words = queryWords(q).slice(0, MAX_QUERY_TERMS);
    if (words.length === 0) return none;
    this.demoteNames(q, words);
    for (const j of joinedPairs(q, (w) => this.data.nameWordIds.has(w))) {
      if (words.length < MAX_QUERY_TERMS && this.df(j.term) > 0 && !words.some((w) => w.term === j.term)) words.push(j);
    }
    const { scores, serverScores, touched } = this;
    const { postings, serverPostings } = this.data;
    const hits: number[] = [];
    let weight = 1;
    const add: Add = (docIdx, v) => {
      if (!touched[docIdx]) {
        touched[docIdx] = 1;
        hits.push(docIdx);
      }
      scores[docIdx]! += v * weight;
    };
    const servers: number[] = [];
    const addServer = (t: string): void => {
      const id = this.data.dict.ids.get(t);
      if (id === undefined) return;
      for (let k = serverPostings.off[id]!; k < serverPostings.off[id + 1]!; k++) {
        const s = serverPostings.docs[k]!;
        if (serverScores[s] === 0) servers.push(s);
        serverScores[s]! += serverPostings.scores[k]! * weight;
      }
    };
    for (const w of words) {
      weight = w.weight;
      if (w.expansion || w.synonyms) {
        this.addBest(this.alternatives(w), add);
        if (w.expansion) for (const t of w.expansion) addServer(t);
      } else if (w.parts) {
        this.addJoined(w, words, add);
      } else {
        const id = this.data.dict.ids.get(w.term);
        if (id !== undefined && postings.df(id) > 0) {
          for (let k = postings.off[id]!; k < postings.off[id + 1]!; k++) add(postings.docs[k]!, postings.scores[k]!);
        } else this.prefixMatch(w.term, add);
      }
      addServer(w.term);
    }
    const sv = this.tuning.serverVocabulary;
    for (const s of servers) {
      const bonus = sv * serverScores[s]!;
      serverScores[s] = 0;
      // Only tools that matched some query word themselves get their server's bonus.
      for (const d of this.data.serverMembers[s]!) if (touched[d]) scores[d]! += bonus;
    }
    const rules = queryRules(this.data, q, words, this.tuning);
    // The scratch arrays are clean again before the caller's filter runs: it may even search this index.
    const final = new Float64Array(this.data.ids.length);
    const matched: number[] = [];
    for (const d of hits) {
      const sc = scores[d]! * ruleFactor(this.data, rules, d, this.tuning);
      scores[d] = 0;
      touched[d] = 0;
      if (sc > 0) {
        final[d] = sc;
        matched.push(d);
      }
    }
    return { hits: matched, scores: final };
  }

  /**
   * A capitalised query word that no tool's name or label and no server's name uses
   * ("from Boston to New York", "in Tokyo") names a place or a person: an argument,
   * whatever tool texts mention it as an example.
   */
  private demoteNames(q: string, words: QueryWord[]): void {
    const names = properNouns(q);
    if (names.size === 0) return;
    const { nameWordIds, serverNames } = this.data;
    for (const w of words) {
      if (names.has(w.surface) && !nameWordIds.has(w.surface) && !nameWordIds.has(w.term) && !serverNames.has(w.term))
        w.weight = Math.min(w.weight, ARGUMENT_WEIGHT);
    }
  }

  private df(term: string): number {
    const id = this.data.dict.ids.get(term);
    return id === undefined ? 0 : this.data.postings.df(id);
  }

  /**
   * What a word with an expansion or synonyms may match, each with its factor: the word
   * itself, what an abbreviation stands for, and each synonym, a little less and never
   * more than the word itself would weigh ("create" offering the rarer "add" must not lift
   * add_* tools above create_*).
   */
  private alternatives(w: QueryWord): Array<readonly [readonly string[], number]> {
    const alts: Array<readonly [readonly string[], number]> = [[[w.term], 1]];
    if (w.expansion) alts.push([w.expansion, 1]);
    const n = this.data.ids.length;
    const own = this.df(w.term);
    const ownIdf = own > 0 ? idf(n, own) : Infinity;
    for (const t of w.synonyms ?? []) {
      const df = this.df(t);
      if (df > 0) alts.push([[t], this.tuning.synonym * Math.min(1, ownIdf / idf(n, df))]);
    }
    return alts;
  }

  /** Adds, per tool, the best of several alternatives, each a sum over its terms times its factor. */
  private addBest(alternatives: ReadonlyArray<readonly [readonly string[], number]>, add: Add): void {
    const { postings, dict } = this.data;
    const best = new Map<number, number>();
    for (const [alt, factor] of alternatives) {
      const sum = new Map<number, number>();
      for (const t of alt) {
        const id = dict.ids.get(t);
        if (id === undefined) continue;
        for (let k = postings.off[id]!; k < postings.off[id + 1]!; k++) {
          const d = postings.docs[k]!;
          sum.set(d, (sum.get(d) ?? 0) + postings.scores[k]! * factor);
        }
      }
      for (const [d, v] of sum) if (v > (best.get(d) ?? 0)) best.set(d, v);
    }
    for (const [d, v] of best) add(d, v);
  }

  /**
   * Two query words written together ("sub agent" → subagent): the better of the two
   * forms per tool, not both, so a tool that has the word either way ("Spawn sub-agent",
   * subagents_kill) scores alike. The words themselves were already added; the joined
   * form adds only what it has beyond them.
   */
  private addJoined(j: QueryWord, words: readonly QueryWord[], add: Add): void {
    const { postings, dict } = this.data;
    const id = dict.ids.get(j.term);
    if (id === undefined) return;
    const parts = words.filter((w) => w.term === j.parts![0] || w.term === j.parts![1]).map((w) => [dict.ids.get(w.term) ?? -1, w.weight] as const);
    for (let k = postings.off[id]!; k < postings.off[id + 1]!; k++) {
      const d = postings.docs[k]!;
      let already = 0;
      for (const [p, pw] of parts) already += pw * this.score(p, d);
      const extra = postings.scores[k]! - already / j.weight;
      if (extra > 0) add(d, extra);
    }
  }

  /** Tool d's precomputed score for term id t (0 when absent), by binary search in t's posting list. */
  private score(t: number, d: number): number {
    const { off, docs, scores } = this.data.postings;
    if (t < 0) return 0;
    let lo = off[t]!;
    let hi = off[t + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (docs[mid]! < d) lo = mid + 1;
      else hi = mid;
    }
    return lo < off[t + 1]! && docs[lo] === d ? scores[lo]! : 0;
  }

  /** A query word unknown to the catalog: the terms it begins, at reduced weight, best per tool. */
  private prefixMatch(t: string, add: Add): void {
    if (t.length < 3 || this.tuning.prefixFallback === 0) return;
    const { dict, postings } = this.data;
    const voc = (this.vocabulary ??= dict.terms.filter((_, id) => postings.df(id) > 0).sort());
    let lo = 0;
    let hi = voc.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (voc[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    const best = new Map<number, number>();
    for (let i = lo, k = 0; i < voc.length && k < 16 && voc[i]!.startsWith(t); i++, k++) {
      const id = dict.ids.get(voc[i]!)!;
      for (let j = postings.off[id]!; j < postings.off[id + 1]!; j++) {
        const d = postings.docs[j]!;
        best.set(d, Math.max(best.get(d) ?? 0, postings.scores[j]!));
      }
    }
    for (const [d, v] of best) add(d, v * this.tuning.prefixFallback);
  }

  /**
   * "Did you mean": ids whose id or name is a few edits from `text` (a mistyped id such
   * as "openclaw:core:mesage" or a name such as "github_craete_issue"), closest first;
   * failing that, the best search hits for the words of its name part.
   */
  private lower: { ids: string[]; names: string[] } | undefined;

  suggest(text: string, limit: number): string[] {
    if (typeof text !== "string" || !(limit > 0)) return [];
    const full = text.trim().toLowerCase().slice(0, 200);
    if (!full) return [];
    const namePart = full.slice(full.lastIndexOf(":") + 1);
    const scored: Array<[number, number]> = [];
    // Lowercased once per index: a flood of unknown ids asks this thousands of times.
    this.lower ??= { ids: this.data.ids.map((s) => s.toLowerCase()), names: this.data.names.map((s) => s.toLowerCase()) };
    for (let i = 0; i < this.data.ids.length; i++) {
      const id = this.lower.ids[i]!;
      const name = this.lower.names[i]!;
      const dId = editDistance(full, id, allowedEdits(id.length));
      const dName = namePart ? editDistance(namePart, name, allowedEdits(name.length)) : Infinity;
      const d = Math.min(dId <= allowedEdits(id.length) ? dId : Infinity, dName <= allowedEdits(name.length) ? dName + 0.5 : Infinity);
      if (d !== Infinity) scored.push([i, d]);
    }
    scored.sort((a, b) => a[1] - b[1] || a[0] - b[0]);
    const out = scored.slice(0, Math.floor(limit)).map(([i]) => this.data.ids[i]!);
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
