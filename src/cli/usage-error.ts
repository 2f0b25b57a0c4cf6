/**
 * The error every subcommand throws for bad arguments (./main.ts exits 2 for it). In a
 * module of its own so the server commands (`start`, `sandbox`, `orchestrator`) can use
 * it without loading `codemode exec` and its dependencies on their start path.
 */
export class UsageError extends Error {
  override name = "UsageError";
}
