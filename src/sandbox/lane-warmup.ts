/**
 * The probe program the pool runs to prove a lane can run code and to warm it: its worker
 * compiles the prelude and prepares its VM image before real work arrives. Used at start
 * (./pool-start.ts, through the fair queue) and for each new surge lane (straight onto it).
 */
import { MessageChannel } from "node:worker_threads";
import type { Lane } from "./lanes.js";
import { shareCatalog } from "./shared-catalog.js";
import { EMPTY_GUEST_CATALOG, type Task, type WorkerMessage } from "./task-protocol.js";

/** Small limits for `return 1`. */
export const PROBE_LIMITS = { timeoutMs: 10_000, memoryLimitBytes: 16 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 1, maxSnapshotBytes: 1_024 };

/** Runs the code-mode probe on `lane`, ignoring its outcome. */
export function warmLane(lane: Lane): void {
  const channel = new MessageChannel();
  channel.port1.on("message", (m: WorkerMessage) => m.t === "done" && channel.port1.close());
  const task: Task = { kind: "exec", source: "return 1", language: "javascript", limits: PROBE_LIMITS, catalog: shareCatalog(EMPTY_GUEST_CATALOG), contextJson: "null", outputBytesUsed: 0, surface: "code", port: channel.port2 };
  lane.piscina.run(task, { transferList: [channel.port2] }).catch(() => channel.port1.close());
}
