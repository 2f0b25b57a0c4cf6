/**
 * Text → search terms for the tool-search index, the same way for tool text and for
 * queries: identifiers split (snake_case, camelCase, dots, dashes, colons, slashes),
 * lowercased, English stopwords dropped, and a light deterministic stemmer so that
 * "issues", "creating" and "created" meet "issue" and "create". Kept separate so the
 * rules can be unit-tested and read in one place.
 */

import { ARGUMENT_WEIGHT, phraseRoles } from "./phrases.js";
import { EXPANSIONS, STOPWORDS, SYNONYMS } from "./vocabulary.js";

export { ARGUMENT_WEIGHT, CONTENT_WEIGHT } from "./phrases.js";

export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}

/**
 * Splits text into lowercase words: camelCase and acronym boundaries ("listPRs" →
 * list prs, "HTTPServer" → http server), then every run of non-letters/digits (_ . - : / spaces …).
 */
export function splitWords(text: string): string[] {
  const out: string[] = [];
  forEachWord(text, (w) => {
    out.push(w);
  });
  return out;
}

/** Character classes of non-ASCII code units, memoized: 0 separator, 1 lowercase or other letter or digit, 2 uppercase. */
const UNICODE_CLASS = new Map<number, number>();
function unicodeClass(c: number): number {
  let k = UNICODE_CLASS.get(c);
  if (k === undefined) {
    const ch = String.fromCharCode(c);
    k = /\p{Lu}/u.test(ch) ? 2 : /[\p{L}\p{N}]/u.test(ch) ? 1 : 0;
    if (UNICODE_CLASS.size < 10_000) UNICODE_CLASS.set(c, k);
  }
  return k;
}

/** Classes of ASCII characters: 0 separator, 1 lowercase letter or digit, 2 uppercase letter. */
const ASCII_CLASS = Uint8Array.from({ length: 128 }, (_, c) => (c >= 97 && c <= 122 ? 1 : c >= 65 && c <= 90 ? 2 : c >= 48 && c <= 57 ? 1 : 0));

/** Lowercase letter (ASCII or not), for the acronym rule. */
function isLowerAt(text: string, i: number): boolean {
  if (i >= text.length) return false;
  const c = text.charCodeAt(i);
  if (c < 128) return c >= 97 && c <= 122;
  return /\p{Ll}/u.test(text[i]!);
}

/**
 * `splitWords` without the array: each word to `fn`, in order (the index build's hot
 * path). One scan for any text in the Basic Multilingual Plane, ASCII or not; text with
 * characters beyond it (astral letters, emoji) takes the equivalent regular expressions.
 */
export function forEachWord(text: string, fn: (word: string) => void): void {
  if (/[\ud800-\udfff]/.test(text)) {
    const spaced = text
      .replace(/([\p{Ll}\p{N}])(\p{Lu})/gu, "$1 $2")
      .replace(/(\p{Lu}+)(\p{Lu}\p{Ll}{2})/gu, "$1 $2")
      .toLowerCase();
    for (const w of spaced.split(/[^\p{L}\p{N}]+/u)) if (w.length > 0) fn(w);
    return;
  }
  const n = text.length;
  // Lowercasing keeps positions except for a few letters ("İ" → "i̇"): then word by word.
  const lower = text.toLowerCase();
  const word = lower.length === n ? (a: number, b: number): string => lower.slice(a, b) : (a: number, b: number): string => text.slice(a, b).toLowerCase();
  let start = -1;
  let prev = 0;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? text.charCodeAt(i) : 32;
    const k = c < 128 ? ASCII_CLASS[c]! : unicodeClass(c);
    if (k === 0) {
      if (start >= 0) fn(word(start, i));
      start = -1;
    } else if (start < 0) {
      start = i;
    } else if (k === 2) {
      // camelCase ("listPrs"), digit then capital ("s3Bucket"), or an acronym's end ("HTTPServer").
      const p = text.charCodeAt(i - 1);
      const camel = prev === 1 && (p >= 128 ? /[\p{Ll}\p{N}]/u.test(text[i - 1]!) : true);
      if (camel || (prev === 2 && isLowerAt(text, i + 1) && isLowerAt(text, i + 2))) {
        fn(word(start, i));
        start = i;
      }
    }
    prev = k;
  }
}

const VOWEL = /[aeiouy]/;
/** Double consonants that words really end with ("pull", "pass", "buzz", "diff"): never undoubled. */
const KEEP_DOUBLE = new Set(["l", "s", "z", "f"]);

function undouble(stem: string): string {
  const n = stem.length;
  if (n >= 4 && stem[n - 1] === stem[n - 2] && !KEEP_DOUBLE.has(stem[n - 1]!) && !VOWEL.test(stem[n - 1]!)) return stem.slice(0, -1);
  return stem;
}

/** British → American spelling of the regular cases, so both meet in one stem. */
const BRITISH = /(?:is|ys)(?:e|es|ed|ing|ation|ations)$|our(?:s|ed|ing|ite|ites)?$|tre[sd]?$|ell(?:ed|ing)$/;
function americanSpelling(w: string): string {
  if (!BRITISH.test(w)) return w;
  return w
    .replace(/^(\p{L}{3,})is(e|es|ed|ing|ation|ations)$/u, "$1iz$2")
    .replace(/^(\p{L}{2,})ys(e|es|ed|ing)$/u, "$1yz$2")
    .replace(/^(\p{L}{3,})our(s|ed|ing|ite|ites)?$/u, "$1or$2")
    .replace(/^(\p{L}{2,})tre(s|d)?$/u, "$1ter$2")
    .replace(/^(\p{L}{3,})ell(ed|ing)$/u, "$1el$2");
}

/**
 * A light suffix stemmer: plurals (-s, -es, -ies) or -ing, -ed/-ied, then -ction/-ation/
 * -etion nouns lose "ion" and a final silent "e" is dropped, so every form of a verb
 * meets ("create", "creates", "creating", "created", "creation" → "creat"). Stems keep a
 * vowel and at least 3 letters;
 * words under 4 letters and numbers are left alone. British spellings meet American
 * ones first (summarise, analyse, colour, centre, cancelled). Deterministic, no dictionary.
 */
export function stem(word: string): string {
  if (word.length < 4 || !/^\p{L}+$/u.test(word)) return word;
  let w = americanSpelling(word);
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

/** The terms one lowercase word of a tool's text contributes: its own and, for an abbreviation, what it stands for; none for a stopword. */
export function wordTerms(w: string): string[] {
  const t = termOf(w);
  if (!t) return [];
  const extra = EXPANSIONS.get(w);
  return extra ? [t, ...extra.map(stem)] : [t];
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

/**
 * One word of a query: its term; for an abbreviation, the terms it stands for
 * (`expansion`, one alternative); for a word with synonyms, their terms (`synonyms`,
 * each an alternative of its own).
 */
export type QueryWord = {
  term: string;
  surface: string;
  weight: number;
  expansion?: readonly string[];
  synonyms?: readonly string[];
  /** For two adjacent words written together ("argo cd" → argocd): the terms of the two words. */
  parts?: readonly [string, string];
};

/**
 * Spans of a query that are argument values, not a description of the tool: quoted
 * text (straight or curly quotes, the curly ones escaped so the bundle's text stays
 * ASCII: V8 keeps it one byte per character), emails, URLs, #channels and @handles, and
 * file names ("config.yaml").
 */
const ARGUMENT_SPANS =
  /"[^"]*"|\u201c[^\u201d]*\u201d|\S+@\S+\.\S+|https?:\/\/\S+|[#@][\p{L}\p{N}_-]+|[\p{L}\p{N}_-]+\.(?:txt|md|json|ya?ml|toml|ini|csv|tsv|log|js|jsx|ts|tsx|mjs|py|go|rs|java|rb|php|sh|html|css|xml|pdf|docx?|xlsx?|pptx?|png|jpe?g|gif|svg|zip|tar|gz)\b/giu;

/** The word a recurring phrase adds to a query ("every monday", "daily"), with what tools call it otherwise. */
const RECURRING = { term: stem("recurring"), surface: "recurring", weight: 1, synonyms: ["schedule", "recurrence", "cron"].map(stem) } as const;

/** The distinct words of a query, in order; an abbreviation and its expansion, or a word and its synonyms, stay one word. */
export function queryWords(text: string): QueryWord[] {
  const out: QueryWord[] = [];
  const seen = new Map<string, QueryWord>();
  const argumentWords = new Set<string>();
  for (const m of text.matchAll(ARGUMENT_SPANS)) for (const w of splitWords(m[0])) argumentWords.add(w);
  const words = splitWords(text);
  const roles = phraseRoles(words);
  words.forEach((w, i) => {
    const synonyms = SYNONYMS.get(w);
    if ((STOPWORDS.has(w) && !synonyms) || (w.length === 1 && !/\p{N}/u.test(w))) return;
    const term = stem(w);
    const weight = argumentWords.has(w) ? ARGUMENT_WEIGHT : (roles.weights[i] ?? 1);
    const prev = seen.get(term);
    if (prev) {
      // A word written twice counts once, as strongly as its most tool-like use.
      prev.weight = Math.max(prev.weight, weight);
      return;
    }
    const word: QueryWord = { term, surface: w, weight };
    const expansion = EXPANSIONS.get(w);
    if (expansion) word.expansion = expansion.map(stem);
    if (synonyms) word.synonyms = synonyms.map(stem);
    seen.set(term, word);
    out.push(word);
  });
  // "every monday", "daily": what tools call a recurring or scheduled job, said otherwise.
  if (roles.recurring && !seen.has(RECURRING.term)) out.push({ ...RECURRING, synonyms: [...RECURRING.synonyms] });
  return out;
}

/**
 * Adjacent query words written together ("argo cd" → argocd, "one drive" → onedrive,
 * "key vault" → keyvault): the caller keeps those its vocabulary knows. Two stopwords
 * join only into a word that `isNameWord` knows as written ("microsoft to do" →
 * todo, as in create-todo-task), never into a mere term ("for me" is not "form").
 */
export const JOINED_WEIGHT = 0.75;
export function joinedPairs(text: string, isNameWord?: (word: string) => boolean): QueryWord[] {
  const ws = splitWords(text).slice(0, 64);
  const out: QueryWord[] = [];
  for (let i = 0; i + 1 < ws.length; i++) {
    const a = ws[i]!;
    const b = ws[i + 1]!;
    if (a.length < 2 || b.length < 2 || !/^\p{L}+$/u.test(a + b) || (STOPWORDS.has(a) && STOPWORDS.has(b) && !isNameWord?.(a + b))) continue;
    const surface = a + b;
    out.push({ term: stem(surface), surface, weight: JOINED_WEIGHT, parts: [stem(a), stem(b)] });
  }
  return out;
}
