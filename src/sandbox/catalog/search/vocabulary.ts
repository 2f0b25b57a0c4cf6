/**
 * The word lists of tool search, kept apart from the tokenizing code so they can be
 * read and reviewed in one place: stopwords, abbreviations and what they stand for,
 * and everyday synonyms (verbs above all) that a query may use for the word a tool's
 * name uses. Argument-like words (times, dates) are in ./phrases.ts, with their rules.
 */

/** Words that carry no tool meaning in a task-style query ("can you please open a …"). */
export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    "a an the and or nor but if then else so than too very to in on at of for from by with without into onto over under " +
    "about above below between through during before after up down out off again further once here there when where why how " +
    "all any both each few more most other some such only own same just also not no yes " +
    "i me my mine myself we us our ours you your yours he him his she her it its they them their theirs this that these those " +
    "what whats which who whom whose am is are was were be been being have has had having do does did doing done " +
    "will would shall should can could may might must let lets please thanks thank want wants need needs like " +
    "im ive id ill youre dont doesnt didnt cant wont isnt arent " +
    "new using use used uses many much every via etc e g ie eg"
  ).split(" "),
);

/** Common abbreviations in task phrasing and tool texts, with the words they stand for. */
export const EXPANSIONS: ReadonlyMap<string, readonly string[]> = new Map([
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
  ["app", ["application"]],
  ["apps", ["application"]],
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
 * an alternative: a tool matching the word itself scores as before, one matching a
 * synonym scores a little less (`SearchTuning.synonym`). Verbs first, because sibling
 * tools of one server usually differ only in their verb and a query rarely uses the
 * verb the tool's name does ("add a checklist" → create_checklist, "find flights" →
 * searchFlights…). A stopword listed here ("done") is kept in queries for its synonyms.
 */
export const SYNONYMS: ReadonlyMap<string, readonly string[]> = (() => {
  const m = new Map<string, string[]>();
  const add = (word: string, ...alts: string[]): void => {
    m.set(word, [...(m.get(word) ?? []), ...alts]);
  };
  /** Each word of a group offers the others. */
  const group = (...words: string[]): void => {
    for (const w of words) add(w, ...words.filter((x) => x !== w));
  };
  group("create", "add");
  add("make", "create");
  add("insert", "add", "create");
  add("schedule", "create");
  add("book", "create");
  group("search", "find");
  add("lookup", "search", "find");
  add("look", "search", "find");
  add("show", "list");
  add("display", "list", "get");
  add("view", "get", "list");
  add("see", "get", "list");
  add("fetch", "get");
  add("retrieve", "get");
  group("delete", "remove");
  add("erase", "delete");
  add("cancel", "delete");
  add("destroy", "delete");
  group("update", "edit");
  add("modify", "update", "edit");
  add("change", "update", "edit");
  group("run", "execute");
  group("send", "post");
  add("text", "message", "sms");
  add("go", "navigate");
  add("visit", "navigate");
  add("who", "user", "member");
  add("row", "record");
  add("rows", "record");
  add("done", "complete");
  add("finish", "complete");
  add("picture", "image");
  add("pictures", "image");
  group("folder", "directory");
  return m;
})();
