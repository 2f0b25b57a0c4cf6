/**
 * Building the tool-search index from a catalog: field texts capped against hostile
 * catalogs, BM25F term frequencies (one weighted, length-normalised frequency per term
 * and tool), the per-server vocabulary, and what the ranking rules need per tool (its
 * verb, its name's words and terms, its server). Runs once per catalog version on the
 * sidecar's main thread, so it works on integer term ids and typed arrays throughout.
 */
import { descriptionIntent, toolIntent } from "./intent.js";
import { PairsBuilder, type PostingLists, TermDictionary } from "./postings.js";
import { type SchemaText, schemaText } from "./schema-text.js";
import { splitWords, terms } from "./tokenize.js";
import { FIELDS, type SearchField, type SearchTuning } from "./tuning.js";

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

export type IndexData = {
  ids: string[];
  names: string[];
  dict: TermDictionary;
  postings: PostingLists;
  serverPostings: PostingLists;
  serverMembers: Int32Array[];
  serverOf: Int32Array;
  /** Each server's names (name, title, aliases) as term lists, indexed by each of their terms. */
  serverNames: Map<string, Array<[number, readonly string[]]>>;
  intents: Uint8Array;
  /**
   * Words of each tool's name and label as written ("boards" in list_boards, "groups" in
   * "List Resource Groups"), each once, as ids of `nameWordIds`.
   */
  nameWords: Int32Array[];
  nameWordIds: Map<string, number>;
  /** Term ids of each tool's name other than its server's name ("slack" in slack_post_message). */
  nameTerms: Int32Array[];
};

export const CAP = { name: 200, label: 200, description: 4_000, server: 1_000, list: 32, item: 100 } as const;

export const cut = (s: string | undefined, n: number): string => (typeof s === "string" ? (s.length > n ? s.slice(0, n) : s) : "");
const list = (xs: readonly string[] | undefined): string =>
  Array.isArray(xs)
    ? xs
        .slice(0, CAP.list)
        .map((x) => cut(typeof x === "string" ? x : "", CAP.item))
        .join(" ")
    : "";

/** Field texts of one tool, capped against hostile catalogs. */
function fieldTexts(d: SearchDoc, schemas: Map<string, SchemaText>): Record<SearchField, string> {
  const json = typeof d.parametersJson === "string" ? d.parametersJson : "";
  let params = schemas.get(json);
  if (!params) schemas.set(json, (params = schemaText(json)));
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

/** The fields whose words make up a server's vocabulary (each tool's, plus the server's description once). */
const VOCABULARY_FIELDS: ReadonlyArray<number> = (["name", "server", "label", "description", "keywords"] as const).map((f) => FIELDS.indexOf(f));
const SERVER_DESCRIPTION = FIELDS.indexOf("serverDescription");
const NAME = FIELDS.indexOf("name");

export function buildIndex(docs: readonly SearchDoc[], tuning: SearchTuning): IndexData {
  const n = docs.length;
  const F = FIELDS.length;
  const dict = new TermDictionary();
  const ids = docs.map((d) => String(d.id));
  const names = docs.map((d) => cut(String(d.name), CAP.name));

  // Pass 1: every field of every tool as term ids, in one flat array.
  const tokens = dict.tokens;
  const fieldOff = new Int32Array(n * F + 1);
  const lengthSum = new Float64Array(F);
  const schemas = new Map<string, SchemaText>();
  // A server's own name in its tools' names (slack_post_message, list-calendars of
  // google-calendar) says nothing about which of its tools is meant: the server field has
  // it. Those words are left out of the name field, which keeps its length.
  const serverTerms = new Map<string, Set<number>>();
  const nameLength = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const d = docs[i]!;
    const texts = fieldTexts(d, schemas);
    for (let f = 0; f < F; f++) {
      if (f === NAME) {
        const server = cut(String(d.sourceName), CAP.item);
        let skip = serverTerms.get(server);
        if (!skip) serverTerms.set(server, (skip = new Set(terms(server).map((t) => dict.id(t)))));
        nameLength[i] = dict.addText(texts.name, skip) + dict.skipped;
        lengthSum[f]! += nameLength[i]!;
      } else lengthSum[f]! += dict.addText(texts[FIELDS[f]!]);
      fieldOff[i * F + f + 1] = tokens.length;
    }
  }
  const avg = Array.from(lengthSum, (s) => Math.max(1, s / Math.max(1, n)));

  // Pass 2: BM25F, one weighted, length-normalised term frequency per (term, tool).
  const T = dict.size;
  const count = new Float64Array(T);
  const tf = new Float64Array(T);
  const fieldTouched: number[] = [];
  const docTouched: number[] = [];
  const pairs = new PairsBuilder(Math.max(1024, tokens.length));
  for (let i = 0; i < n; i++) {
    for (let f = 0; f < F; f++) {
      const w = tuning.weights[FIELDS[f]!];
      const start = fieldOff[i * F + f]!;
      const end = fieldOff[i * F + f + 1]!;
      if (w === 0 || start === end) continue;
      const norm = 1 - tuning.b[FIELDS[f]!] + (tuning.b[FIELDS[f]!] * (f === NAME ? nameLength[i]! : end - start)) / avg[f]!;
      for (let k = start; k < end; k++) {
        const t = tokens[k]!;
        if (count[t] === 0) fieldTouched.push(t);
        count[t]!++;
      }
      for (const t of fieldTouched) {
        if (tf[t] === 0) docTouched.push(t);
        tf[t]! += (w * count[t]!) / norm;
        count[t] = 0;
      }
      fieldTouched.length = 0;
    }
    for (const t of docTouched) {
      pairs.push(t, tf[t]!);
      tf[t] = 0;
    }
    docTouched.length = 0;
    pairs.endDoc();
  }
  const postings = pairs.build(T, tuning.k1);

  // Servers: members, names, and each server as one document of its tools' vocabulary.
  const serverIndex = new Map<string, number>();
  const members: number[][] = [];
  const serverOf = new Int32Array(n);
  const serverNames = new Map<string, Array<[number, readonly string[]]>>();
  for (let i = 0; i < n; i++) {
    const d = docs[i]!;
    const key = `${d.source}:${String(d.sourceName)}`;
    let s = serverIndex.get(key);
    if (s === undefined) {
      serverIndex.set(key, (s = members.length));
      members.push([]);
      addServerNames(serverNames, s, d);
    }
    members[s]!.push(i);
    serverOf[i] = s;
  }
  const serverPairs = new PairsBuilder();
  const uses = new Float64Array(T);
  const mark = new Int32Array(T);
  let stamp = 0;
  const touched: number[] = [];
  /** Counts each term of one field of tool i once. */
  const use = (i: number, f: number): void => {
    stamp++;
    for (let k = fieldOff[i * F + f]!; k < fieldOff[i * F + f + 1]!; k++) {
      const t = tokens[k]!;
      if (mark[t] === stamp) continue;
      mark[t] = stamp;
      if (uses[t] === 0) touched.push(t);
      uses[t]!++;
    }
  };
  for (const m of members) {
    for (const i of m) for (const f of VOCABULARY_FIELDS) use(i, f);
    // The server's description once (every tool of the server carries the same).
    use(m[0]!, SERVER_DESCRIPTION);
    // Saturate by the share of the server's tools that use a term, so big servers do not win by size.
    const size = Math.max(1, m.length / 4);
    for (const t of touched) {
      serverPairs.push(t, (3 * uses[t]!) / (uses[t]! + size));
      uses[t] = 0;
    }
    touched.length = 0;
    serverPairs.endDoc();
  }
  const serverPostings = serverPairs.build(T, tuning.k1);

  const nameWordIds = new Map<string, number>();
  const nameWords = names.map((nm, i) =>
    Int32Array.from(new Set([...splitWords(nm), ...splitWords(cut(docs[i]!.label, CAP.label))]), (w) => {
      let id = nameWordIds.get(w);
      if (id === undefined) nameWordIds.set(w, (id = nameWordIds.size));
      return id;
    }),
  );
  const nameTerms = names.map((_, i) => Int32Array.from(new Set(tokens.slice(fieldOff[i * F + NAME]!, fieldOff[i * F + NAME + 1]!))));
  return {
    ids,
    names,
    dict,
    postings,
    serverPostings,
    serverMembers: members.map((m) => Int32Array.from(m)),
    serverOf,
    serverNames,
    intents: Uint8Array.from(names, (nm, i) => toolIntent(nm) || descriptionIntent(cut(docs[i]!.description, CAP.description))),
    nameWords,
    nameWordIds,
    nameTerms,
  };
}

/** Indexes a server's name, title and aliases by their terms ("mcp" and "server" are not names). */
function addServerNames(out: Map<string, Array<[number, readonly string[]]>>, s: number, d: SearchDoc): void {
  const aliases = Array.isArray(d.serverAliases) ? d.serverAliases.slice(0, CAP.list) : [];
  for (const nm of [String(d.sourceName), d.serverTitle, ...aliases]) {
    const ts = [...new Set(terms(cut(typeof nm === "string" ? nm : "", CAP.item)))].filter((t) => t !== "mcp" && t !== "server");
    for (const t of ts) {
      let e = out.get(t);
      if (!e) out.set(t, (e = []));
      e.push([s, ts]);
    }
  }
}
