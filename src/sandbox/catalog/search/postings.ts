/**
 * The storage of the tool-search index, built for a cheap build on the sidecar's main
 * thread: every term gets a small integer id once per build (a catalog repeats the same
 * words thousands of times), field texts become flat arrays of ids, and the posting
 * lists of all terms live in three typed arrays (compressed sparse rows) instead of a
 * map of JavaScript arrays, so a 2,000-tool build allocates little for the collector.
 */
import { forEachWord, wordTerms } from "./tokenize.js";

/**
 * Term ↔ id for one build, and the term ids of every text added, in one flat array
 * (`tokens`). Each distinct word is stemmed and looked up once, each distinct text split
 * once (a catalog repeats descriptions and parameter texts across tools and accounts).
 */
export class TermDictionary {
  readonly ids = new Map<string, number>();
  readonly terms: string[] = [];
  readonly tokens: number[] = [];
  /** Words `addText` left out of the last text for `skip`. */
  skipped = 0;
  /** Text → where its ids were first appended to `tokens` (start, count). */
  private readonly texts = new Map<string, number>();
  /** Word → its term id, -1 for a dropped word, or -2 - k for the k-th multi-term word (an abbreviation). */
  private readonly words = new Map<string, number>();
  private readonly multi: number[][] = [];

  get size(): number {
    return this.terms.length;
  }

  /** A dictionary for searching only (no texts to add), rebuilt from its terms in id order (index-wire.ts). */
  static fromTerms(terms: readonly string[]): TermDictionary {
    const d = new TermDictionary();
    for (const t of terms) d.id(t);
    return d;
  }

  id(term: string): number {
    let id = this.ids.get(term);
    if (id === undefined) {
      id = this.terms.length;
      this.ids.set(term, id);
      this.terms.push(term);
    }
    return id;
  }

  /**
   * Appends the term ids of `text` (stopwords dropped, stemmed, abbreviations expanded)
   * to `tokens`; returns how many. Words whose term is in `skip` are left out and
   * counted in `skipped` (a server's own name in its tools' names: slack_post_message).
   */
  addText(text: string, skip?: ReadonlySet<number>): number {
    const out = this.tokens;
    const before = out.length;
    this.skipped = 0;
    if (!text) return 0;
    const seen = skip ? undefined : this.texts.get(text);
    if (seen !== undefined) {
      const start = Math.floor(seen / 65_536);
      const count = seen % 65_536;
      for (let k = start; k < start + count; k++) out.push(out[k]!);
      return count;
    }
    forEachWord(text, (w) => {
      let code = this.words.get(w);
      if (code === undefined) {
        const ts = wordTerms(w);
        if (ts.length === 0) code = -1;
        else if (ts.length === 1) code = this.id(ts[0]!);
        else {
          code = -2 - this.multi.length;
          this.multi.push(ts.map((t) => this.id(t)));
        }
        this.words.set(w, code);
      }
      if (skip && code >= 0 && skip.has(code)) {
        this.skipped++;
        return;
      }
      if (code >= 0) out.push(code);
      else if (code <= -2) for (const id of this.multi[-2 - code]!) out.push(id);
    });
    const count = out.length - before;
    if (count < 65_536 && !skip) this.texts.set(text, before * 65_536 + count);
    return count;
  }
}

export function idf(n: number, df: number): number {
  return Math.log(1 + (n - df + 0.5) / (df + 0.5));
}

/**
 * Posting lists over a fixed term dictionary: for term id t, entries off[t]..off[t+1] of
 * `docs` (ascending) and `scores` (the precomputed BM25 contribution of t to that doc).
 */
export class PostingLists {
  constructor(
    readonly off: Int32Array,
    readonly docs: Int32Array,
    readonly scores: Float32Array,
    /** Number of documents the lists were built over (for idf). */
    readonly n: number,
  ) {}

  df(term: number): number {
    return term >= 0 && term + 1 < this.off.length ? this.off[term + 1]! - this.off[term]! : 0;
  }
}

/**
 * Builds posting lists from per-document (term id, weighted term frequency) pairs:
 * document d owns entries docOff[d]..docOff[d+1] of `termIds`/`tfs`, each term at most
 * once. Scores are BM25 saturated: idf · tf · (k1 + 1) / (k1 + tf).
 */
export function buildPostings(nTerms: number, docOff: Int32Array, termIds: Int32Array, tfs: Float64Array, k1: number): PostingLists {
  const nDocs = docOff.length - 1;
  const off = new Int32Array(nTerms + 1);
  for (let j = 0; j < docOff[nDocs]!; j++) off[termIds[j]! + 1]!++;
  for (let t = 0; t < nTerms; t++) off[t + 1]! += off[t]!;
  const cursor = off.slice(0, nTerms);
  const docs = new Int32Array(off[nTerms]!);
  const scores = new Float32Array(off[nTerms]!);
  for (let d = 0; d < nDocs; d++) {
    for (let j = docOff[d]!; j < docOff[d + 1]!; j++) {
      const t = termIds[j]!;
      const k = cursor[t]!++;
      docs[k] = d;
      scores[k] = tfs[j]!;
    }
  }
  for (let t = 0; t < nTerms; t++) {
    const w = idf(nDocs, off[t + 1]! - off[t]!);
    for (let k = off[t]!; k < off[t + 1]!; k++) {
      const tf = scores[k]!;
      scores[k] = (w * tf * (k1 + 1)) / (k1 + tf);
    }
  }
  return new PostingLists(off, docs, scores, nDocs);
}

/** Growable (term id, value) pairs per document, for `buildPostings`. */
export class PairsBuilder {
  private ids: Int32Array;
  private vals: Float64Array;
  private len = 0;
  private readonly starts: number[] = [0];

  constructor(capacity = 1024) {
    this.ids = new Int32Array(capacity);
    this.vals = new Float64Array(capacity);
  }

  push(id: number, v: number): void {
    if (this.len === this.ids.length) {
      const ids = new Int32Array(this.len * 2);
      ids.set(this.ids);
      this.ids = ids;
      const vals = new Float64Array(this.len * 2);
      vals.set(this.vals);
      this.vals = vals;
    }
    this.ids[this.len] = id;
    this.vals[this.len++] = v;
  }

  /** Closes the current document's pairs. */
  endDoc(): void {
    this.starts.push(this.len);
  }

  build(nTerms: number, k1: number): PostingLists {
    return buildPostings(nTerms, Int32Array.from(this.starts), this.ids.subarray(0, this.len), this.vals.subarray(0, this.len), k1);
  }
}
