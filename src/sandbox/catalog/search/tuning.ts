/**
 * The knobs of tool search in one place: the indexed fields, their BM25F weights and
 * length normalisation, and the factors of the ranking rules applied on top of word
 * overlap. Kept apart from the index so the benchmark can try other values
 * (`--tuning`) and a reader sees every constant that shapes a ranking together.
 */

export const FIELDS = ["name", "server", "label", "description", "paramNames", "paramDetails", "keywords", "serverDescription"] as const;
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
  /** Score factor when the query names a verb and the tool's name has none (kubectl_logs, tts). */
  intentUnknown: number;
  /** Extra score share for each query word found in the tool's name exactly as written ("boards" in list_boards). */
  exactName: number;
  /** Factor on a match through a query word's synonym ("add" finding create_checklist) against the word itself. */
  synonym: number;
  /** Extra score share for the part of the tool's name (less its server's name) that the query's words cover. */
  nameCoverage: number;
  /** Extra score share for the tools of a server the query names in full ("google calendar", "argo cd"). */
  serverNamed: number;
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
  intentUnknown: 0.95,
  exactName: 0.3,
  synonym: 0.9,
  nameCoverage: 0.15,
  serverNamed: 0.2,
};
