/**
 * One session's computing guests cannot starve the others, against a real two-thread
 * sidecar: while a session keeps sending busy loops (each in its own agent run, so the
 * per-run cap does not apply), another session's short programs all complete, long
 * before the loops are done; the looping session runs on at most one thread at a time
 * (its extra loops wait in the fair queue, and those that cannot get a thread in time end
 * `runtime_unavailable`); its programs run on a background thread whose OS priority is
 * lowered (nice 10, read from /proc), while the other session's run at normal priority; and
 * once the session used more than its CPU share while others wait, its new execs are
 * refused with RESOURCE_EXHAUSTED naming the share. The share's window is 3 s here, not
 * the product's 10 s (CODEMODE_TEST_CPU_SHARE_WINDOW_MS), so exceeding it takes 3 s of loops.
 */
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRun } from "../helpers/gateway.js";
import { collectStream, scope as newScope, startStack, type Stack, type ToolCallEvent } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

/** The CPU share's window for this sidecar, and what one session may hold of 2 threads over it (40%). */
const WINDOW_MS = 3_000;
const SHARE_MS = WINDOW_MS * 2 * 0.4;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack(["--threads", "2"], { env: { CODEMODE_TEST_CPU_SHARE_WINDOW_MS: String(WINDOW_MS) } });
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

/** Events in the order the test saw them (an ordering, not a clock). */
let seen = 0;

async function runIn(prefix: string, code: string, config: Record<string, unknown> = {}) {
  const scope = newScope(prefix);
  await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
  const out = await collectStream(stack.sandbox.exec({ scope, code, config }));
  return { ...out.model, at: ++seen };
}

describe("a fair share of the pool per session", () => {
  it("keeps a looping session to one thread and serves the other session's programs meanwhile", async () => {
    const hog: Array<Promise<{ status: string; code?: string; at: number } | { refused: string; at: number }>> = [];
    for (let i = 0; i < 6; i++) {
      hog.push(
        runIn("hog", "for (;;) {}", { timeoutMs: 2_000 }).catch((err: { code?: string; message?: string }) => ({
          refused: `${err.code}: ${err.message}`,
          at: ++seen,
        })),
      );
      await new Promise((r) => setTimeout(r, 100));
    }
    const benign = [];
    for (let i = 0; i < 20; i++) benign.push(await runIn("light", `return ${i} * 2`));
    const benignDone = ++seen;
    const hogs = await Promise.all(hog);

    expect(benign.map((b) => b.value)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
    // The light session did not wait for the loops: it was done before the last of them.
    expect(benignDone).toBeLessThan(Math.max(...hogs.map((h) => h.at)));
    // The loops ran one at a time: two timed out on their thread at most in the window they
    // shared; the rest waited and ended without a thread, or were refused at the edge.
    const outcomes = hogs.map((h) => ("refused" in h ? "refused" : h.code));
    expect(outcomes.filter((o) => o === "timeout").length).toBeLessThanOrEqual(3);
    expect(outcomes.filter((o) => o === "runtime_unavailable" || o === "refused").length).toBeGreaterThanOrEqual(3);
  });

  it("runs a looping session's programs on a background thread at a lower OS priority, while light ones run", async () => {
    // The session's first loop runs on a light thread (nobody knew it loops) and makes it heavy.
    await runIn("nicer", "for (;;) {}", { timeoutMs: 1_000 });
    const loop = runIn("nicer", "for (;;) {}", { timeoutMs: 2_500 });
    // The loop's thread: the one with nice 10 whose CPU time grows.
    const threads = () => {
      const pid = stack.proc.child.pid!;
      return readdirSync(`/proc/${pid}/task`).map((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // After the name: state is field 3, utime and stime 14 and 15, nice 19.
        return { tid, cpu: Number(f[11]) + Number(f[12]), nice: Number(f[16]), name: /\((.*)\)/.exec(stat)![1]! };
      });
    };
    const niced = await until(() => {
      const n = threads().filter((t) => t.nice === 10);
      return n.length > 0 && n;
    }, "a thread at nice 10");
    expect(niced.length).toBe(1);
    // The loop runs there: the thread's CPU time grows (read until it does).
    const before = niced[0]!.cpu;
    await until(() => threads().find((t) => t.tid === niced[0]!.tid)!.cpu > before, "the nice 10 thread's CPU time to grow", { everyMs: 100 });
    // Meanwhile a light session's programs run on the light threads.
    for (let i = 0; i < 5; i++) expect((await runIn("chatty", `return ${i} + 1`)).value).toBe(i + 1);
    expect(await loop).toMatchObject({ status: "failed", code: "timeout" });
    // Every other thread of the sidecar runs at normal priority.
    expect(threads().filter((t) => t.nice !== 0 && t.tid !== niced[0]!.tid)).toEqual([]);
    // The pool's threads are named for the OS (top -H, ps -L): the background one, and the two base ones.
    expect(niced[0]!.name).toBe("codemode-bg");
    expect(threads().filter((t) => t.name === "codemode-worker").length).toBeGreaterThanOrEqual(2);
  });

  it("refuses a session over its CPU share while another session has work, naming the share", async () => {
    // Three seconds of loops in one session (over 40% of 2 threads x the 3 s window), one at a time.
    for (let i = 0; i < 2; i++) await runIn("greedy", "for (;;) {}", { timeoutMs: 1_500 });
    // Another session has work: its exec awaits a tool call, answered only after the refusal.
    const { scope } = await openRun(stack, [{ name: "later", description: "Answers when the test says so", parameters: { type: "object" } }]);
    let announce!: (call: ToolCallEvent) => void;
    const called = new Promise<ToolCallEvent>((r) => (announce = r));
    const other = collectStream(stack.sandbox.exec({ scope, code: "return await tools.later({})" }), (c) => announce(c));
    const call = await called;
    await expect(runIn("greedy", "return 1")).rejects.toMatchObject({
      code: "resource_exhausted",
      message: expect.stringContaining(`in the last ${WINDOW_MS / 1000} s, more than its share (${SHARE_MS} ms) while other sessions wait`),
    });
    await stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '"done"' } });
    expect((await other).model.value).toBe("done");
  }, 60_000);
});
