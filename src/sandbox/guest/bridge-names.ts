/**
 * The names and ids the host and every surface's prelude agree on, so the worker can
 * drive a VM without knowing which surface built it: the two host functions, the id that
 * asks for the program's settlement, and how a cell is wrapped and named. They are part of
 * the snapshot format: renaming one breaks every stored snapshot.
 */

/** Names the host registers; part of the snapshot format, never rename. */
export const HOST_SYNC = "__cm_host_sync";
export const HOST_ASYNC = "__cm_host_async";
/** The file name a cell is compiled under (error locations name it). */
export const CELL_FILENAME = "cell.js";
/** The id `deliver` answers with the program's settlement (for a VM restored from a snapshot). */
export const SETTLEMENT_QUERY = "";

/**
 * Wraps the model's program as an async function body so top-level `return` and
 * `await` work. The wrapper sits on line 1 before the code, so only line-1 columns
 * shift (by CELL_PREFIX.length), which error locations correct for.
 */
export const CELL_PREFIX = "(async function () {";
export const CELL_SUFFIX = "\n})";

export function wrapCell(source: string): string {
  return CELL_PREFIX + source + CELL_SUFFIX;
}
