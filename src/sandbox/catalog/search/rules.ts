/**
 * Ranking rules applied after word overlap (BM25F) has scored the tools, as factors on
 * each score: they settle choices between tools that share most of their words, which
 * is most choices among one server's tools. The verb of the query against the verb of
 * the tool's name; a word found in the name or label exactly as written; how much of
 * the tool's name the query covers; and a server the query names in full.
 */
import type { IndexData } from "./index-build.js";
import { Intent, queryIntent } from "./intent.js";
import type { QueryWord } from "./tokenize.js";
import type { SearchTuning } from "./tuning.js";

export type QueryRules = {
  intent: Intent;
  /** Name words (ids) the query writes in a form other than its term ("boards"), for the exact-name rule. */
  exact: Uint8Array;
  exactCount: number;
  exactShare: number;
  /** Term ids of the query: its words, what abbreviations stand for, and synonyms. */
  terms: Uint8Array;
  /** Servers whose name, title or an alias the query names in full. */
  named: Uint8Array;
  namedCount: number;
};

export function queryRules(data: IndexData, query: string, words: readonly QueryWord[], tuning: SearchTuning): QueryRules {
  const termMark = new Uint8Array(data.dict.size);
  const termSet = new Set<string>();
  for (const w of words) {
    for (const t of [w.term, ...(w.expansion ?? []), ...(w.synonyms ?? [])]) {
      termSet.add(t);
      const id = data.dict.ids.get(t);
      if (id !== undefined) termMark[id] = 1;
    }
  }
  const named = new Uint8Array(data.serverMembers.length);
  let namedCount = 0;
  for (const t of termSet) {
    for (const [s, ts] of data.serverNames.get(t) ?? []) {
      if (!named[s] && ts.every((x) => termSet.has(x))) {
        named[s] = 1;
        namedCount++;
      }
    }
  }
  const exact = new Uint8Array(data.nameWordIds.size);
  let exactCount = 0;
  for (const w of words) {
    const id = w.surface !== w.term ? data.nameWordIds.get(w.surface) : undefined;
    if (id !== undefined && !exact[id]) {
      exact[id] = 1;
      exactCount++;
    }
  }
  return {
    intent: queryIntent(query),
    exact,
    exactCount,
    exactShare: tuning.exactName / Math.max(1, words.length),
    terms: termMark,
    named,
    namedCount,
  };
}

/** The factor on tool d's word-overlap score. */
export function ruleFactor(data: IndexData, q: QueryRules, d: number, tuning: SearchTuning): number {
  let f = 1;
  // The query's verb against the tool's: list vs create vs delete…
  if (q.intent !== Intent.None) {
    const ti = data.intents[d]!;
    f *= ti === Intent.None ? tuning.intentUnknown : q.intent & ti ? tuning.intentMatch : tuning.intentMismatch;
  }
  // "boards" as written in list_boards (or "groups" in the label "List Resource Groups"), not only its stem.
  if (q.exactCount > 0) {
    let k = 0;
    for (const w of data.nameWords[d]!) k += q.exact[w]!;
    f *= 1 + k * q.exactShare;
  }
  // How much of the name (less the server's own name) the query covers: get_transcript over
  // get-transcript-languages for "get the transcript".
  const nt = data.nameTerms[d]!;
  if (tuning.nameCoverage > 0 && nt.length > 0) {
    let k = 0;
    for (const t of nt) k += q.terms[t]!;
    f *= 1 + (tuning.nameCoverage * k) / nt.length;
  }
  // A server the query names in full: "delete the kubernetes deployment" is kubectl_delete, not
  // another server's delete_deployments.
  if (q.namedCount > 0 && q.named[data.serverOf[d]!]) f *= 1 + tuning.serverNamed;
  return f;
}
