/**
 * A session's light work joins its own working thread before it wakes an idle one
 * (src/sandbox/pool/scheduler.ts), and a task that joined a lane whose guest then computes is
 * placed elsewhere after its leash (src/sandbox/pool/pool.ts). With real worker threads: where
 * the fair queue puts a light task next to its session's task (a new one, an old one), next
 * to a full lane, next to another session's task, for a heavy session, and when asked to
 * spread; and through a
 * real two-thread pool, a session's program submitted right behind its loop on the same
 * lane is moved off it and finishes long before the loop, never waiting for it. Ordering
 * is asserted, never wall-clock time.
 */
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { Lanes, type Lane } from "../../src/sandbox/pool/lanes.js";
import { FairScheduler, PACK_YOUNG_MS } from "../../src/sandbox/pool/scheduler.js";
import { EMPTY_GUEST_CATALOG, type TaskOutcome } from "../../src/sandbox/pool/task-protocol.js";
import type { ExecEvents } from "../../src/sandbox/pool/pool-contract.js";
import { until } from "../helpers/until.js";

const wasmModule = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const WORKER = fileURLToPath(new URL("../../dist/sandbox/worker/worker.js", import.meta.url));
// The built pool, whose worker file is dist's (the sources' own would look for it beside them).
const { startPool } = (await import(
  new URL("../../dist/sandbox/pool/pool-start.js", import.meta.url).href
)) as typeof import("../../src/sandbox/pool/pool-start.js");

describe("where the fair queue puts a light task (real worker threads)", () => {
  const lanes = new Lanes(2, { filename: WORKER, execsPerWorker: 2, wasmModule, stackSizeMb: 16 });
  afterAll(() => lanes.destroy());
  const scheduler = new FairScheduler(lanes, 2, () => 0, 10_000);
  const [first, second] = lanes.all as [Lane, Lane];

  /** Where the scheduler starts one task of `tenant` (and whether it joined a busy lane). */
  function place(tenant: string, spread = false, avoid?: Lane): [Lane, boolean] {
    let placed: [Lane, boolean] | undefined;
    scheduler.submit({
      tenant,
      ...(spread ? { spread } : {}),
      ...(avoid ? { avoid } : {}),
      run: (lane, packed) => (placed = [lane, packed]),
      gone: () => placed !== undefined,
    });
    if (!placed) throw new Error("the task was not placed");
    return placed;
  }

  it("takes the least loaded lane when no lane has a task, and joins its session's busy lane otherwise", () => {
    expect(place("chat")).toEqual([first, false]);
    second.enter("chat", 1);
    expect(place("chat")).toEqual([second, true]);
    second.leave("chat", 1);
  });

  it("does not join a full lane, nor join at all when asked to spread, and passes over a lane the task just left", () => {
    expect(place("chat", true, first)).toEqual([second, false]);
    second.enter("chat", 1);
    expect(place("chat", true)).toEqual([first, false]);
    // Taken back from the first lane: the second, though busier, comes first.
    expect(place("chat", true, first)).toEqual([second, false]);
    second.enter("chat", 2);
    // Full (two tasks on a two-task lane): the light task takes the other lane.
    expect(place("chat")).toEqual([first, false]);
    second.leave("chat", 1);
    second.leave("chat", 2);
  });

  it("does not join a lane whose task was placed a while ago (it may be a VM awaiting tool answers)", async () => {
    second.enter("chat", 5);
    // Until the lane's own clock has the task older than the packing window.
    await until(() => second.oldestTaskMs() > PACK_YOUNG_MS, "the task to be older than PACK_YOUNG_MS", { everyMs: 1 });
    expect(place("chat")).toEqual([first, false]);
    second.leave("chat", 5);
  });

  it("never joins a lane that runs another session's task, and a heavy session joins none", () => {
    second.enter("other", 3);
    expect(place("chat")).toEqual([first, false]);
    second.enter("chat", 4);
    expect(place("chat")).toEqual([first, false]);
    second.leave("other", 3);
    // Placed again just now: only tasks placed in the last 2 ms are joined, and a loaded
    // machine can take longer than that between the lines above.
    second.leave("chat", 4);
    second.enter("chat", 4);
    expect(place("chat")).toEqual([second, true]);
    scheduler.noteHog("chat");
    // Heavy now: it waits for a background lane (none yet; one is being added), joining nothing.
    let placed = false;
    scheduler.submit({ tenant: "chat", run: () => (placed = true), gone: () => placed });
    expect(placed).toBe(false);
    second.leave("chat", 4);
  });
});

describe("a task that joined a lane whose guest then computes (a real two-thread pool)", () => {
  const lines: string[] = [];
  const log = pino({ level: "debug" }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  // Both threads from the start (a started pool defers all but its first: src/sandbox/pool/pool-start.ts).
  const poolReady = startPool({ threads: 2, execsPerWorker: 4, startThreads: 2, log });
  afterAll(async () => (await poolReady).close());
  const ignore: ExecEvents = { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} };
  const task = (source: string) =>
    ({
      kind: "exec",
      source,
      language: "javascript",
      limits: { timeoutMs: 20_000, memoryLimitBytes: 32 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 1, maxSnapshotBytes: 1_024 },
      catalog: EMPTY_GUEST_CATALOG,
      contextJson: "null",
      outputBytesUsed: 0,
      surface: "code",
    }) as const;

  it("places the sidecar's start-up probes (one per thread) without joining a lane", async () => {
    await poolReady;
    // Submitted together, one per thread: a probe that joined the other's lane would be taken back by its leash.
    expect(lines.filter((line) => line.includes("placing a task that joined"))).toEqual([]);
  });

  it("is moved off it after its leash and finishes before the loop, without waiting for it", async () => {
    const pool = await poolReady;
    lines.length = 0;
    const ended: string[] = [];
    const track = (name: string, p: Promise<TaskOutcome>) => p.then((o) => (ended.push(name), o));
    // Submitted in the same turn: the loop's task goes to the first lane, and the light one
    // joins it there (the lane runs only this session's task, placed just now).
    const loop = track("loop", pool.exec(task("let x = 0; for (let i = 0; i < 15_000_000; i++) x += i % 7; return x > 0"), ignore, "chat").outcome);
    const light = track("light", pool.exec(task("return [1, 2, 3].map((x) => x * 7)"), ignore, "chat").outcome);
    const l = await light;
    expect(l).toMatchObject({ status: "completed", valueJson: "[7,14,21]" });
    // Usually the loop's VM takes the thread first and the light task is taken back by its
    // leash, then placed on the other lane (not behind the loop again). When the worker
    // reached the light task while the loop's cell was still being prepared, it ran first
    // there and was never moved. Either way it was not moved by the 50 ms check for a
    // hogged lane, which is what it would wait for without the leash.
    const leashed = lines.some((line) => line.includes("placing a task that joined a busy lane on another one"));
    expect(l.moves).toBe(leashed ? 1 : 0);
    expect(lines.some((line) => line.includes("moving a task that had not started off a lane another guest holds"))).toBe(false);
    expect(await loop).toMatchObject({ status: "completed", valueJson: "true" });
    expect(ended).toEqual(["light", "loop"]);
  });
});
