/**
 * The tool-search index as plain data, so it can be built on a worker thread and handed
 * to the main thread: everything `buildIndex` returns, with the per-tool Int32Arrays
 * flattened into one array each (one buffer to transfer instead of thousands), classes
 * reduced to their fields, and only what searching needs (the dictionary's terms, not
 * its build-time caches). `toWire` lists the buffers to transfer (zero copy);
 * `fromWire` rebuilds an equal IndexData cheaply (a Map of terms and array views). The
 * ranking never sees the difference: the same arrays, the same term ids.
 */
import type { IndexData } from "./index-build.js";
import { PostingLists, TermDictionary } from "./postings.js";

type PostingsWire = { off: Int32Array; docs: Int32Array; scores: Float32Array; n: number };
/** Many small Int32Arrays as one: list i is values[off[i]..off[i+1]]. */
type ListsWire = { off: Int32Array; values: Int32Array };

export type IndexWire = {
  ids: string[];
  names: string[];
  terms: string[];
  postings: PostingsWire;
  serverPostings: PostingsWire;
  serverMembers: ListsWire;
  serverOf: Int32Array;
  serverNames: IndexData["serverNames"];
  intents: Uint8Array;
  nameWords: ListsWire;
  /** The keys of `nameWordIds` in id order. */
  nameWordKeys: string[];
  nameTerms: ListsWire;
};

function flatten(lists: readonly Int32Array[]): ListsWire {
  const off = new Int32Array(lists.length + 1);
  for (let i = 0; i < lists.length; i++) off[i + 1] = off[i]! + lists[i]!.length;
  const values = new Int32Array(off[lists.length]!);
  for (let i = 0; i < lists.length; i++) values.set(lists[i]!, off[i]!);
  return { off, values };
}

function unflatten(w: ListsWire): Int32Array[] {
  const out = new Array<Int32Array>(w.off.length - 1);
  for (let i = 0; i < out.length; i++) out[i] = w.values.subarray(w.off[i]!, w.off[i + 1]!);
  return out;
}

const postingsWire = (p: PostingLists): PostingsWire => ({ off: p.off, docs: p.docs, scores: p.scores, n: p.n });

/** The index as structured-cloneable data, and the buffers to transfer with it. */
export function toWire(data: IndexData): { wire: IndexWire; transfer: ArrayBuffer[] } {
  const wire: IndexWire = {
    ids: data.ids,
    names: data.names,
    terms: data.dict.terms,
    postings: postingsWire(data.postings),
    serverPostings: postingsWire(data.serverPostings),
    serverMembers: flatten(data.serverMembers),
    serverOf: data.serverOf,
    serverNames: data.serverNames,
    intents: data.intents,
    nameWords: flatten(data.nameWords),
    nameWordKeys: [...data.nameWordIds.keys()],
    nameTerms: flatten(data.nameTerms),
  };
  const arrays = [
    wire.postings.off,
    wire.postings.docs,
    wire.postings.scores,
    wire.serverPostings.off,
    wire.serverPostings.docs,
    wire.serverPostings.scores,
    wire.serverMembers.off,
    wire.serverMembers.values,
    wire.serverOf,
    wire.intents,
    wire.nameWords.off,
    wire.nameWords.values,
    wire.nameTerms.off,
    wire.nameTerms.values,
  ];
  // Only whole, distinct buffers can be transferred; a view into a shared one is copied instead.
  const transfer = new Set<ArrayBuffer>();
  for (const a of arrays) if (a.byteOffset === 0 && a.byteLength === a.buffer.byteLength && a.buffer instanceof ArrayBuffer) transfer.add(a.buffer);
  return { wire, transfer: [...transfer] };
}

/** IndexData equal (for searching) to the one `toWire` was given. */
export function fromWire(w: IndexWire): IndexData {
  const nameWordIds = new Map<string, number>();
  for (let i = 0; i < w.nameWordKeys.length; i++) nameWordIds.set(w.nameWordKeys[i]!, i);
  const postings = (p: PostingsWire) => new PostingLists(p.off, p.docs, p.scores, p.n);
  return {
    ids: w.ids,
    names: w.names,
    dict: TermDictionary.fromTerms(w.terms),
    postings: postings(w.postings),
    serverPostings: postings(w.serverPostings),
    serverMembers: unflatten(w.serverMembers),
    serverOf: w.serverOf,
    serverNames: w.serverNames,
    intents: w.intents,
    nameWords: unflatten(w.nameWords),
    nameWordIds,
    nameTerms: unflatten(w.nameTerms),
  };
}
