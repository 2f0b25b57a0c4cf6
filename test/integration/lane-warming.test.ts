/**
 * A lane whose thread is new is *warming* until its warm-up ran (src/sandbox/pool/lanes.ts,
 * lane-warmup.ts): with real worker threads, a replaced thread's lane is warming; the fair
 * queue holds a heavy session's task back until the warm-up reports done, and sends a light
 * one there only when no warm lane can take it; the warm-up probes the catalogs of the latest execs; a session whose guest held a lane
 * stays heavy for HOG_MEMORY_MS; a deferred base lane starts no thread until a task goes there
 * or it is started, and then warms like a new one. Through the service: after a thread is killed for a loop,
 * the log says the new thread warmed, and work goes on; a sidecar's second thread starts
 * after its ready line and warms before it takes work.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { Lanes, WORKER_YOUNG_GENERATION_MB, type Lane } from "../../src/sandbox/pool/lanes.js";
import { FairScheduler, HOG_MEMORY_MS } from "../../src/sandbox/pool/scheduler.js";
import { RecentCatalogs } from "../../src/sandbox/pool/lane-warmup.js";
import { EMPTY_GUEST_CATALOG } from "../../src/sandbox/pool/task-protocol.js";
import { execute, logged, openEmptyRun, startStack } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

const wasmModule = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const WORKER = fileURLToPath(new URL("../../dist/sandbox/worker/worker.js", import.meta.url));

/** A fair queue over `lanes` that records each warm-up (the test ends it with `done`) and pumps when a lane has warmed. */
function queueWithWarmups(lanes: Lanes): { scheduler: FairScheduler; warmups: Array<{ lane: Lane; done: () => void }> } {
  const scheduler = new FairScheduler(lanes, 2, () => 0, 10_000);
  const warmups: Array<{ lane: Lane; done: () => void }> = [];
  lanes.onWarm = (lane, done) => warmups.push({ lane, done });
  lanes.onWarmed = () => scheduler.pump();
  return { scheduler, warmups };
}

describe("a warming lane (real worker threads)", () => {
  const lanes = new Lanes(1, { filename: WORKER, execsPerWorker: 2, wasmModule, stackSizeMb: 16 });
  afterAll(() => lanes.destroy());

  it("gives a light task to its thread's replacement only when no warm lane can, and a heavy one only to a background lane once warmed", async () => {
    const { scheduler, warmups } = queueWithWarmups(lanes);
    const lane = lanes.all[0]!;
    await until(() => lane.piscina.threads.length > 0, "the lane's thread", { everyMs: 20 });
    const threadId = lane.piscina.threads[0]!.threadId;

    lanes.terminate(threadId);
    expect(lane.warming).toBe(true);
    expect(warmups.map((w) => w.lane)).toEqual([lane]);
    // A second kill while warming does not start a second warm-up.
    lanes.terminate(threadId);
    expect(warmups).toHaveLength(1);
    expect(lanes.anyFreeBesides({} as Lane)).toBe(false);

    const ran: Array<[string, Lane]> = [];
    scheduler.noteHog("looper");
    scheduler.submit({ tenant: "looper", run: (l) => ran.push(["looper", l]), gone: () => ran.some(([t]) => t === "looper") });
    expect(ran).toEqual([]);
    // The heavy task asked for a background lane, which warms like any new thread.
    expect(warmups).toHaveLength(2);
    const background = warmups[1]!.lane;
    expect(background.kind).toBe("background");
    expect(lanes.backgrounds).toBe(1);
    // The only light lane is warming: a light task goes there rather than wait for it here.
    scheduler.submit({ tenant: "chat", run: (l) => ran.push(["chat", l]), gone: () => ran.some(([t]) => t === "chat") });
    expect(ran).toEqual([["chat", lane]]);

    // The base lane warmed: still no heavy task there.
    warmups[0]!.done();
    expect(lane.warming).toBe(false);
    expect(ran).toEqual([["chat", lane]]);
    warmups[1]!.done();
    expect(ran).toEqual([
      ["chat", lane],
      ["looper", background],
    ]);
  });

  it("sends light work to a warm lane rather than a warming one", async () => {
    const two = new Lanes(2, { filename: WORKER, execsPerWorker: 2, wasmModule, stackSizeMb: 16 });
    try {
      const scheduler = new FairScheduler(two, 2, () => 0, 10_000);
      two.onWarm = () => undefined;
      await until(() => two.all.every((l) => l.piscina.threads.length > 0), "both lanes' threads", { everyMs: 20 });
      two.terminate(two.all[0]!.piscina.threads[0]!.threadId);
      const ran: Lane[] = [];
      for (let i = 0; i < 2; i++) scheduler.submit({ tenant: `chat-${i}`, run: (l) => ran.push(l), gone: () => false });
      expect(ran).toEqual([two.all[1], two.all[1]]);
    } finally {
      await two.destroy();
    }
  });

  it("runs its thread with a capped V8 young generation (V8's default lets new space reach 32 MiB per thread)", async () => {
    const lane = lanes.all[0]!;
    await until(() => lane.piscina.threads.length > 0, "the lane's thread", { everyMs: 20 });
    // The limits the thread's isolate was made with, as Node reports them for a running worker.
    const limits = lane.piscina.threads[0]!.resourceLimits!;
    expect(limits.maxYoungGenerationSizeMb).toBe(WORKER_YOUNG_GENERATION_MB);
    expect(WORKER_YOUNG_GENERATION_MB).toBeLessThan(48);
    expect(limits.stackSizeMb).toBe(16);
  });

  it("keeps a session heavy for HOG_MEMORY_MS after its guest held a lane, then forgets it", () => {
    const scheduler = new FairScheduler(lanes, 2, () => 0, 10_000);
    expect(scheduler.heavy("looper")).toBe(false);
    scheduler.noteHog("looper");
    expect(scheduler.heavy("looper")).toBe(true);
    expect(scheduler.heavy("chat")).toBe(false);
    // Noted long enough ago: the next walk of the queue forgets it.
    scheduler.noteHog("looper", Date.now() - HOG_MEMORY_MS - 1);
    scheduler.submit({ tenant: "chat", run: () => undefined, gone: () => true });
    expect(scheduler.heavy("looper")).toBe(false);
  });

  it("warms with the latest catalogs (versioned, no per-run context), most recent last, at most three", () => {
    const recent = new RecentCatalogs();
    const cat = (version: string, needsContext = false) => ({ ...EMPTY_GUEST_CATALOG, version, needsContext });
    recent.note(cat("v1"));
    recent.note(cat("v2"), "tool_search");
    recent.note({ ...EMPTY_GUEST_CATALOG }); // unversioned: no image to prepare
    recent.note(cat("ctx", true)); // per-run context: never from an image
    recent.note(cat("mcp"), "mcp_run"); // codemode.run: never from an image
    recent.note(cat("v3"));
    recent.note(cat("v1"));
    recent.note(cat("v4"));
    expect(recent.list().map((t) => `${t.surface}:${t.catalog.version}`)).toEqual(["code:v3", "code:v1", "code:v4"]);
  });
});

describe("a deferred base lane (real worker threads)", () => {
  const lanes = new Lanes(3, { filename: WORKER, execsPerWorker: 2, wasmModule, stackSizeMb: 16 }, 1);
  afterAll(() => lanes.destroy());

  it("starts its thread for its first task (it takes work as an idle lane), keeps it, and warms up when started only if no task did", async () => {
    const { scheduler, warmups } = queueWithWarmups(lanes);
    const [first, taken, idle] = lanes.all as [Lane, Lane, Lane];
    await until(() => first.piscina.threads.length > 0, "the first lane's thread", { everyMs: 20 });
    expect(lanes.started).toBe(1);
    for (const lane of [taken, idle]) {
      expect(lane).toMatchObject({ deferred: true, warming: false, kind: "base" });
      expect(lane.piscina.threads).toHaveLength(0);
    }

    // The first task goes to the started lane; the next one, while it runs, to an idle deferred
    // lane, as to a second started thread (a loop there keeps off the first thread's idle runs).
    const ran: Lane[] = [];
    const submit = (tenant: string) => scheduler.submit({ tenant, run: (l) => (l.enter(tenant, ran.length + 1), ran.push(l)), gone: () => false });
    submit("a");
    submit("b");
    expect(ran).toEqual([first, taken]);
    // Posting there starts the thread, and the thread stays when the lane is idle (an idle
    // timeout that overflowed Node's timers retired it 1 ms after its task).
    await taken.piscina.run({ kind: "nothing" }).catch(() => undefined);
    expect(taken.piscina.threads.length).toBe(1);
    await new Promise((r) => setTimeout(r, 100));
    expect(taken.piscina.threads.length).toBe(1);

    // Started: the lane no task started warms up; the one a task started needs no warm-up.
    lanes.startDeferred();
    expect(warmups.map((w) => w.lane)).toEqual([idle]);
    expect(taken).toMatchObject({ deferred: false, warming: false });
    expect(idle).toMatchObject({ deferred: false, warming: true });
    expect(lanes.started).toBe(3);
    // Started once: a second call starts nothing.
    lanes.startDeferred();
    expect(warmups).toHaveLength(1);
    warmups[0]!.done();
    expect(idle.warming).toBe(false);
  });
});

describe("a sidecar's deferred thread (real service)", () => {
  it("starts after the ready line, warms before it takes work, and execs complete meanwhile", { timeout: 60_000 }, async () => {
    const stack = await startStack(["--threads", "2"]);
    try {
      const scope = await openEmptyRun(stack.control, "deferred");
      const line = await logged(stack.proc, /new worker thread warmed/);
      expect(JSON.parse(line)).toMatchObject({ lane: 1 });
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => execute(stack, { scope, code: `return ${i}` })));
      expect(results.map((r) => r.model)).toEqual(Array.from({ length: 6 }, (_, i) => expect.objectContaining({ status: "completed", value: i })));
    } finally {
      expect(await stack.stop()).toBe(0);
    }
  });
});

describe("a thread killed for a loop (real service)", () => {
  it("is replaced by a thread that warms before it takes work, and the next execs complete", { timeout: 60_000 }, async () => {
    const stack = await startStack(["--threads", "1"]);
    try {
      const scope = await openEmptyRun(stack.control, "warm");
      expect((await execute(stack, { scope, code: "return 1" })).model.status).toBe("completed");
      const loop = await execute(stack, { scope, code: `new Array(2 ** 32 - 1).join("")`, config: { timeoutMs: 200 } });
      expect(loop.model).toMatchObject({ status: "failed", code: "timeout" });
      const line = await logged(stack.proc, /new worker thread warmed/);
      expect(JSON.parse(line)).toMatchObject({ catalogs: 1 });
      for (let i = 0; i < 5; i++) expect((await execute(stack, { scope, code: `return ${i}` })).model).toMatchObject({ status: "completed", value: i });
    } finally {
      expect(await stack.stop()).toBe(0);
    }
  });
});
