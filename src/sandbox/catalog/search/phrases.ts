/**
 * Query-side phrase rules: which words of a task-style query describe the tool and
 * which are its arguments, read from the few words around them. "a branch called
 * release-2", "a thread about the outage", "an issue for the flaky test", "text John
 * that I'm late" (what follows is content, not the tool); "on friday at 3pm", "every monday" (a time); and
 * "every monday", "daily" (a recurring job, which tools call "recurring" or
 * "schedule"); "from Boston to Denver" (capitalised names, see `properNouns`). Works
 * on the query's lowercase words, before stemming, except `properNouns`, which needs case.
 */

/** Weight of argument-like query words (times, numbers, quoted text…): they only break ties. */
export const ARGUMENT_WEIGHT = 0.3;
/** Weight of a query word inside a content span: more than an argument, less than a word that picks the tool. */
export const CONTENT_WEIGHT = 0.5;

/**
 * Words that are usually the arguments of a task, not what picks the tool ("tomorrow",
 * "8am"): they still count, at ARGUMENT_WEIGHT, so they only break ties.
 */
const TIME_WORDS = new Set(
  "today tomorrow yesterday tonight now week weeks weekend month months year years morning afternoon evening night am pm hour hours minute minutes second seconds later soon".split(
    " ",
  ),
);
const WEEKDAYS = new Set("monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays".split(" "));
/** Words next to a weekday that make it a time ("every monday", "friday at 3pm"), not a name (the monday.com server). */
const TIME_CONTEXT = new Set("every each on next this last until by before after at morning afternoon evening night".split(" "));
const CLOCK = /^\d{1,2}(?:am|pm|h)?$|^\d{1,2}:\d{2}$/;

/** Words that say a job repeats, and the units "every" repeats by. */
const RECURRING = new Set("daily weekly monthly yearly hourly nightly weekdays".split(" "));
const RECURRING_UNITS = new Set(
  "day days week weeks month months year years hour hours minute minutes morning mornings evening evenings night nights weekday weekend".split(" "),
);

/**
 * Words that introduce what a task is about rather than which tool does it. What
 * follows, up to the next preposition, is content; "for" right after a verb ("search
 * for", "wait for") introduces the object instead.
 */
const CONTENT_MARKERS = new Set("about saying says called named titled for".split(" "));
const CONTENT_END = new Set("in on at to into onto from with via using and then or".split(" "));
const FOR_OBJECT = new Set("search searching look looking find ask wait waiting check scan".split(" "));
/** "that" starts content after these verbs and their object ("text John that I'm late", "remind me that…"). */
const SAY_VERBS = new Set("tell text say remind email message reply notify inform write note answer respond sms ping".split(" "));

export type PhraseRoles = {
  /** Per word: a weight below 1 when the word is an argument or content, else undefined. */
  weights: Array<number | undefined>;
  /** Whether the query asks for something that repeats ("every monday", "daily"). */
  recurring: boolean;
};

/** Roles of a query's words; `words` as split by `splitWords`, stopwords included. */
export function phraseRoles(words: readonly string[]): PhraseRoles {
  const weights: Array<number | undefined> = new Array(words.length).fill(undefined);
  let recurring = false;
  let content = false;
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    const before = i > 0 ? words[i - 1]! : "";
    const after = i + 1 < words.length ? words[i + 1]! : "";
    const says = w === "that" && (SAY_VERBS.has(before) || (i > 1 && SAY_VERBS.has(words[i - 2]!)));
    if (says || (CONTENT_MARKERS.has(w) && !(w === "for" && FOR_OBJECT.has(before)))) {
      content = true;
      continue;
    }
    if (CONTENT_END.has(w)) content = false;
    if (RECURRING.has(w) || ((before === "every" || before === "each") && (WEEKDAYS.has(w) || RECURRING_UNITS.has(w) || /^\d+$/.test(w)))) recurring = true;
    const time = TIME_WORDS.has(w) || /\p{N}/u.test(w) || (WEEKDAYS.has(w) && (TIME_CONTEXT.has(before) || TIME_CONTEXT.has(after) || CLOCK.test(after)));
    if (time || RECURRING.has(w)) weights[i] = ARGUMENT_WEIGHT;
    else if (content) weights[i] = CONTENT_WEIGHT;
  }
  return { weights, recurring };
}

/**
 * Capitalised words after a query's first word ("Boston", "Union Square", "Tokyo"),
 * lowercased: names of places and people, so arguments, unless a tool's or server's
 * name uses them ("Slack", "Google Calendar"): the caller checks that. All-caps words
 * (SEO, QR, PLAT) and "I" are not taken: they are acronyms and keys as often as names.
 */
export function properNouns(text: string): Set<string> {
  const out = new Set<string>();
  const words = text.split(/[^\p{L}\p{N}']+/u).filter((w) => w.length > 0);
  for (let i = 1; i < words.length && i < 64; i++) if (/^\p{Lu}\p{Ll}+$/u.test(words[i]!)) out.add(words[i]!.toLowerCase());
  return out;
}
