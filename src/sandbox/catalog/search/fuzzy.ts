/**
 * Edit distance for "did you mean": how far a mistyped tool id or name is from a real
 * one. Optimal string alignment (Levenshtein plus adjacent swaps, so "craete" is one
 * edit from "create"), bounded so a hopeless comparison stops early.
 */

/** The three rows of the table, reused between calls (a "did you mean" compares thousands of names). */
let rows = [new Int32Array(64), new Int32Array(64), new Int32Array(64)];

/** Distance between a and b, or max + 1 as soon as it is known to exceed max. */
export function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  if (a === b) return 0;
  const n = b.length;
  if (rows[0]!.length < n + 1) rows = [new Int32Array(n + 1), new Int32Array(n + 1), new Int32Array(n + 1)];
  let [prev2, prev, cur] = rows as [Int32Array, Int32Array, Int32Array];
  for (let j = 0; j <= n; j++) {
    prev2[j] = 0;
    prev[j] = j;
    cur[j] = 0;
  }
  for (let i = 1; i <= a.length; i++) {
    cur[0] = i;
    let rowMin = i;
    for (let j = 1; j <= n; j++) {
      const cost = a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1;
      let v = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a.charCodeAt(i - 1) === b.charCodeAt(j - 2) && a.charCodeAt(i - 2) === b.charCodeAt(j - 1)) {
        v = Math.min(v, prev2[j - 2]! + 1);
      }
      cur[j] = v;
      if (v < rowMin) rowMin = v;
    }
    if (rowMin > max) return max + 1;
    const done = prev2;
    prev2 = prev;
    prev = cur;
    cur = done;
  }
  return prev[n]!;
}

/** How many edits a string of this length may be from a suggestion: about one in three letters. */
export function allowedEdits(length: number): number {
  return Math.max(1, Math.min(4, Math.floor(length / 3)));
}
