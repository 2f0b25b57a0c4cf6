/**
 * The pool of a sidecar started with `--serve-without-pool` whose sandbox pool could not
 * start (e.g. Node's permission model denies worker threads): it runs nothing. Every task
 * ends at once `failed` with `runtime_unavailable` and the reason, so code mode's exec,
 * `tool_search_code` (whose run then falls back to mode tools) and `codemode.run` say why,
 * while what needs no VM, Tool Search's tool_search, tool_describe and tool_call, is
 * served as usual. The sidecar reports over its link that its pool cannot run code, and
 * the orchestrator offers Tool Search runs mode tools while no attached sidecar can (the
 * seed's fallback when the runtime cannot launch an isolate). A wait is refused before
 * it claims its run (../exec-service.ts), so the run stays for a sidecar that can resume it.
 */
import type { SandboxPool } from "./pool.js";

/** The members of a pool the sidecar's services, server and metrics use. */
type ServedPool = Pick<
  SandboxPool,
  | "threads"
  | "slots"
  | "vmStarts"
  | "utilization"
  | "extraThreads"
  | "workerMemory"
  | "queueSize"
  | "refusal"
  | "setTenantWeights"
  | "tenantUsedMs"
  | "exec"
  | "close"
>;

export function unavailablePool(reason: string): SandboxPool {
  const pool: ServedPool = {
    threads: 0,
    slots: 0,
    vmStarts: { reused: 0, restored: 0, fresh: 0, snapshot: 0 },
    utilization: 0,
    extraThreads: { surge: 0, background: 0 },
    workerMemory: { heapUsed: 0, heapTotal: 0, external: 0, spares: 0, images: 0, compiler: 0 },
    queueSize: 0,
    refusal: () => undefined,
    setTenantWeights: () => undefined,
    tenantUsedMs: () => 0,
    exec: (submission) => ({
      outcome: Promise.resolve({ status: "failed", error: reason, code: "runtime_unavailable", outputBytes: submission.outputBytesUsed }),
      answer() {},
      stage() {},
      unstage() {},
      cancel() {},
      suspend() {},
      approval() {},
    }),
    close: async () => {},
  };
  // A pool is a class with private state; its users touch only the members above.
  return pool as SandboxPool;
}
