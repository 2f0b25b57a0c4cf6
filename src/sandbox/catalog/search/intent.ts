/**
 * What a query wants done (read, create, change, delete, run or send) and what a tool does, from
 * the verbs of the query and the leading verb of the tool's name ("list_boards",
 * "create-event", "API-patch-page"). Tools of the right server often differ only in
 * that verb, and their descriptions paraphrase it, so a small verb table settles many
 * sibling choices that word overlap cannot.
 */
import { splitWords } from "./tokenize.js";

/** A bit set of intents. */
export type Intent = number;
export const Intent = { None: 0, Read: 1, Create: 2, Change: 4, Delete: 8, Run: 16, Send: 32 } as const;

const VERBS: ReadonlyMap<string, Intent> = (() => {
  const m = new Map<string, Intent>();
  const add = (i: Intent, words: string): void => {
    for (const w of words.split(" ")) m.set(w, i);
  };
  add(
    Intent.Read,
    "get gets list lists show view read reads fetch retrieve describe search find query browse lookup look see display what whats which who where when check count inspect",
  );
  add(Intent.Create, "create creates add adds make new insert post write generate upload draft schedule book");
  add(Intent.Change, "update edit modify change set rename move patch mark complete resolve assign toggle reschedule replace");
  add(Intent.Delete, "delete remove drop cancel archive clear destroy uninstall kill terminate erase purge");
  add(Intent.Run, "run runs execute exec start trigger launch invoke rerun deploy");
  add(Intent.Send, "send sends reply forward broadcast notify share push text");
  return m;
})();

/** The intents a query's verbs ask for (a bit set; None when it names no known verb). */
export function queryIntent(query: string): Intent {
  let out = Intent.None;
  for (const w of splitWords(query.slice(0, 256)).slice(0, 64)) out |= VERBS.get(w) ?? Intent.None;
  return out;
}

/** Question words: a query's way of asking to read, never a tool's verb. */
const QUESTION_WORDS = new Set("what whats which who where when".split(" "));

/**
 * What a tool whose name has no verb does, from the first word of its description
 * when that is a verb ("Get logs from Kubernetes resources…" for kubectl_logs;
 * "Retrieves…", "Fetches…" in the third person too).
 */
export function descriptionIntent(description: string): Intent {
  const first = splitWords(description.slice(0, 40))[0] ?? "";
  for (const w of [first, first.replace(/s$/, ""), first.replace(/es$/, "")]) {
    const i = VERBS.get(w);
    if (i !== undefined && !QUESTION_WORDS.has(w)) return i;
  }
  return Intent.None;
}

/** What a tool does, from the first known verb among the first words of its name. */
export function toolIntent(name: string): Intent {
  for (const w of splitWords(name.slice(0, 200)).slice(0, 4)) {
    const i = VERBS.get(w);
    if (i !== undefined) return i;
  }
  return Intent.None;
}
