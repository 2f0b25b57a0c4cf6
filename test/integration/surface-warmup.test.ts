/**
 * The surfaces warmed after the start (src/sandbox/pool/pool-start.ts `warmOtherSurfaces`): the
 * ready line waits only for code mode's prelude; Tool Search's and codemode.run's probes run
 * a second later, and only on an idle pool. A guest that holds the only thread then delays
 * them until it is done: they never queue behind it or make the pool add a thread.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { execute, lineIndex, logged, startStack, type Stack } from "../helpers/harness.js";

let stack: Stack;

beforeAll(async () => {
  stack = await startStack(["--threads", "1"], { env: { CODEMODE_LOG_LEVEL: "debug" } });
});

afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

it("warms Tool Search's and codemode.run's preludes after a guest that holds the only thread, without adding one", async () => {
  // Sent at once after ready: it computes for 2.5 s, past the warm-up's first look at 1 s.
  const { model } = await execute(stack, { code: "const t = Date.now(); while (Date.now() - t < 2500) {} return 'done'", config: { timeoutMs: 10_000 } });
  expect(model).toMatchObject({ status: "completed", value: "done" });
  const warmed = ["tool_search", "mcp_run"].map((surface) => new RegExp(`"surface":"${surface}".*"msg":"surface warmed"`));
  await Promise.all(warmed.map((line) => logged(stack.proc, line, 5_000)));
  // Each warm-up ran after the guest let go of the thread: the sidecar logged the exec's end first.
  const finished = lineIndex(stack.proc, /"msg":"exec finished"/);
  expect(finished).toBeGreaterThan(-1);
  for (const line of warmed) expect(lineIndex(stack.proc, line)).toBeGreaterThan(finished);
  expect(stack.proc.stderr.filter((l) => /adding a (surge|background) thread/.test(l))).toEqual([]);
  expect(stack.proc.stderr.filter((l) => /a surface's probe failed/.test(l))).toEqual([]);
});
