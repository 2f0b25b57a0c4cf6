/**
 * Text → search terms for the tool-search index, the same way for tool text and for
 * queries: identifiers split (snake_case, camelCase, dots, dashes, colons, slashes),
 * lowercased, English stopwords dropped, and a light deterministic stemmer so that
 * "issues", "creating" and "created" meet "issue" and "create". Kept separate so the
 * rules can be unit-tested and read in one place.
 */

/** Words that carry no tool meaning in a task-style query ("can you please open a …"). */
const STOPWORDS = new Set(
  (
    "a an the and or nor but if then else so than too very to in on at of for from by with without into onto over under " +
    "about above below between through during before after up down out off again further once here there when where why how " +
    "all any both each few more most other some such only own same just also not no yes " +
    "i me my mine myself we us our ours you your yours he him his she her it its they them their theirs this that these those " +
    "what whats which who whom whose am is are was were be been being have has had having do does did doing done " +
    "will would shall should can could may might must let lets please thanks thank want wants need needs like " +
    "im ive id ill youre dont doesnt didnt cant wont isnt arent " +
    "new using via etc e g ie eg"
  ).split(" "),
);

export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}

/**
 * Splits text into lowercase words: camelCase and acronym boundaries ("listPRs" →
 * list prs, "HTTPServer" → http server), then every run of non-letters/digits (_ . - : / spaces …).
 */
export function splitWords(text: string): string[] {
  const out: string[] = [];
  if (/[^\x00-\x7f]/.test(text)) {
    const spaced = text
      .replace(/([\p{Ll}\p{N}])(\p{Lu})/gu, "$1 $2")
      .replace(/(\p{Lu}+)(\p{Lu}\p{Ll}{2})/gu, "$1 $2")
      .toLowerCase();
    for (const w of spaced.split(/[^\p{L}\p{N}]+/u)) if (w.length > 0) out.push(w);
    return out;
  }
  // ASCII (almost every tool): the same splits by a scan, much cheaper than the regexes.
  const n = text.length;
  const lower = text.toLowerCase();
  let start = -1;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? text.charCodeAt(i) : 32;
    const upper = c >= 65 && c <= 90;
    if (!(upper || (c >= 97 && c <= 122) || (c >= 48 && c <= 57))) {
      if (start >= 0) out.push(lower.slice(start, i));
      start = -1;
    } else if (start < 0) {
      start = i;
    } else if (upper) {
      const p = text.charCodeAt(i - 1);
      const camel = (p >= 97 && p <= 122) || (p >= 48 && p <= 57);
      const acronymEnd = p >= 65 && p <= 90 && isLower(text.charCodeAt(i + 1)) && isLower(text.charCodeAt(i + 2));
      if (camel || acronymEnd) {
        out.push(lower.slice(start, i));
        start = i;
      }
    }
  }
  return out;
}

function isLower(c: number): boolean {
  return c >= 97 && c <= 122;
}

const VOWEL = /[aeiouy]/;
/** Double consonants that words really end with ("pull", "pass", "buzz", "diff"): never undoubled. */
const KEEP_DOUBLE = new Set(["l", "s", "z", "f"]);

function undouble(stem: string): string {
  const n = stem.length;
  if (n >= 4 && stem[n - 1] === stem[n - 2] && !KEEP_DOUBLE.has(stem[n - 1]!) && !VOWEL.test(stem[n - 1]!)) return stem.slice(0, -1);
  return stem;
}

/**
 * A light suffix stemmer: plurals (-s, -es, -ies) or -ing, -ed/-ied, then -ction/-ation/
 * -etion nouns lose "ion" and a final silent "e" is dropped, so every form of a verb
 * meets ("create", "creates", "creating", "created", "creation" → "creat"). Stems keep a
 * vowel and at least 3 letters;
 * words under 4 letters and numbers are left alone. Deterministic, no dictionary.
 */
export function stem(word: string): string {
  let w = word;
  if (w.length < 4 || !/^\p{L}+$/u.test(w)) return w;
  if (w.endsWith("ies") && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (/(ss|x|z|ch|sh)es$/.test(w)) w = w.slice(0, -2);
  else if (w.endsWith("s") && !/(ss|us|is)$/.test(w)) w = w.slice(0, -1);
  else if (w.endsWith("ied") && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith("ing")) {
    const s = w.slice(0, -3);
    if (s.length >= 3 && VOWEL.test(s)) w = undouble(s);
  } else if (w.endsWith("ed") && !w.endsWith("eed")) {
    const s = w.slice(0, -2);
    if (s.length >= 3 && VOWEL.test(s)) w = undouble(s);
    else if (s.length >= 2) w = w.slice(0, -1); // "used" → "use"
  }
  // The noun of a verb meets the verb: "reaction" → "react", "creation"/"deletion" → "creat"/"delet".
  if (w.length >= 7 && /[cae]tion$/.test(w)) w = w.slice(0, -3);
  if (w.length >= 4 && w.endsWith("e") && !w.endsWith("ee")) w = w.slice(0, -1);
  return w;
}

/** Common abbreviations in task phrasing and tool texts, with the words they stand for. */
const EXPANSIONS: ReadonlyMap<string, readonly string[]> = new Map([
  ["pr", ["pull", "request"]],
  ["prs", ["pull", "request"]],
  ["mr", ["merge", "request"]],
  ["mrs", ["merge", "request"]],
  ["repo", ["repository"]],
  ["repos", ["repository"]],
  ["db", ["database"]],
  ["dbs", ["database"]],
  ["k8s", ["kubernetes"]],
  ["msg", ["message"]],
  ["msgs", ["message"]],
  ["dm", ["direct", "message"]],
  ["dms", ["direct", "message"]],
  ["env", ["environment"]],
  ["config", ["configuration"]],
  ["info", ["information"]],
  ["docs", ["documentation"]],
  ["img", ["image"]],
  ["pic", ["image"]],
  ["pics", ["image"]],
  ["photo", ["image"]],
  ["photos", ["image"]],
  ["email", ["mail"]],
  ["emails", ["mail"]],
  ["mail", ["email"]],
]);

/**
 * Everyday words for what tool texts call otherwise, used only in queries and only as
 * an alternative: a tool matching the word itself scores as before.
 */
const SYNONYMS: ReadonlyMap<string, readonly string[]> = new Map([
  ["row", ["record"]],
  ["rows", ["record"]],
  ["done", ["complete"]],
  ["finish", ["complete"]],
  ["picture", ["image"]],
  ["pictures", ["image"]],
  ["remove", ["delete"]],
  ["show", ["list"]],
  ["folder", ["directory"]],
  ["directory", ["folder"]],
]);

/**
 * Terms of a text: split, stopwords and 1-letter words dropped, stemmed. With
 * `expand`, abbreviations add the words they stand for.
 */
/** Word → its term ("" for a dropped word), memoized: catalogs repeat the same words. */
const TERM_CACHE = new Map<string, string>();
function termOf(w: string): string {
  let t = TERM_CACHE.get(w);
  if (t === undefined) {
    t = STOPWORDS.has(w) || (w.length === 1 && !/\p{N}/u.test(w)) ? "" : stem(w);
    if (TERM_CACHE.size >= 50_000) TERM_CACHE.clear();
    TERM_CACHE.set(w, t);
  }
  return t;
}

export function terms(text: string, expand = false): string[] {
  const out: string[] = [];
  for (const w of splitWords(text)) {
    const t = termOf(w);
    if (!t) continue;
    out.push(t);
    if (expand) {
      const extra = EXPANSIONS.get(w);
      if (extra) for (const e of extra) out.push(stem(e));
    }
  }
  return out;
}

/** One word of a query: its term and, for an abbreviation, the terms it stands for. */
export type QueryWord = { term: string; surface: string; weight: number; expansion?: readonly string[] };

/**
 * Words that are usually the arguments of a task, not what picks the tool ("tomorrow",
 * "8am", "42"): they still count, at ARGUMENT_WEIGHT, so they only break ties.
 */
const ARGUMENT_WORDS = new Set(
  "today tomorrow yesterday tonight now week weeks weekend month months year years morning afternoon evening night am pm daily weekly monthly yearly hour hours minute minutes second seconds later soon".split(" "),
);
export const ARGUMENT_WEIGHT = 0.3;

/**
 * Spans of a query that are argument values, not a description of the tool: quoted
 * text, emails, URLs, #channels and @handles, and file names ("config.yaml").
 */
const ARGUMENT_SPANS =
  /"[^"]*"|“[^”]*”|\S+@\S+\.\S+|https?:\/\/\S+|[#@][\p{L}\p{N}_-]+|[\p{L}\p{N}_-]+\.(?:txt|md|json|ya?ml|toml|ini|csv|tsv|log|js|jsx|ts|tsx|mjs|py|go|rs|java|rb|php|sh|html|css|xml|pdf|docx?|xlsx?|pptx?|png|jpe?g|gif|svg|zip|tar|gz)\b/giu;

/** The distinct words of a query, in order; an abbreviation and its expansion stay one word. */
export function queryWords(text: string): QueryWord[] {
  const out: QueryWord[] = [];
  const seen = new Set<string>();
  const argumentWords = new Set<string>();
  for (const m of text.matchAll(ARGUMENT_SPANS)) for (const w of splitWords(m[0])) argumentWords.add(w);
  for (const w of splitWords(text)) {
    if (STOPWORDS.has(w) || (w.length === 1 && !/\p{N}/u.test(w))) continue;
    const term = stem(w);
    if (seen.has(term)) continue;
    seen.add(term);
    const extra = EXPANSIONS.get(w) ?? SYNONYMS.get(w);
    const weight = ARGUMENT_WORDS.has(w) || argumentWords.has(w) || /\p{N}/u.test(w) ? ARGUMENT_WEIGHT : 1;
    out.push(extra ? { term, surface: w, weight, expansion: extra.map(stem) } : { term, surface: w, weight });
  }
  return out;
}

/**
 * Adjacent query words written together ("argo cd" → argocd, "one drive" → onedrive,
 * "key vault" → keyvault): the caller keeps those its vocabulary knows. Two stopwords
 * never join ("for me" is not "form").
 */
export const JOINED_WEIGHT = 0.75;
export function joinedPairs(text: string): QueryWord[] {
  const ws = splitWords(text).slice(0, 64);
  const out: QueryWord[] = [];
  for (let i = 0; i + 1 < ws.length; i++) {
    const a = ws[i]!;
    const b = ws[i + 1]!;
    if (a.length < 2 || b.length < 2 || !/^\p{L}+$/u.test(a + b) || (STOPWORDS.has(a) && STOPWORDS.has(b))) continue;
    const surface = a + b;
    out.push({ term: stem(surface), surface, weight: JOINED_WEIGHT });
  }
  return out;
}
