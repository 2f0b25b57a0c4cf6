/**
 * Code Mode for MCP spec section 10: one `codemode.run` importing several server modules
 * and composing their calls, a failing call surfacing as a ToolCallError the script can
 * handle (the script is not aborted), and concurrent tool calls within a script. Over
 * streamable HTTP (and once over stdio), with server-everything and the fixture server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { logged, startStack } from "../helpers/harness.js";
import { standardServers, startHttpFixture, startHttpFront, startStdioFront, type Front } from "../helpers/mcp-front.js";

let http: Front;
beforeAll(async () => {
  http = await startHttpFront();
});
afterAll(async () => {
  await http?.close();
});

const COMPOSE = `
  import * as everything from "@codemode/servers/everything";
  import * as fixture from "@codemode/servers/fixture";
  const sum = await everything.get_sum({ a: 19, b: 23 });
  const n = Number(/is (\\d+)/.exec(sum)[1]);
  const item = await fixture.get_item({ id: String(n) });
  const echoed = await everything.echo({ message: item });
  globalThis.__codemode_result__ = { n, item, echoed };`;

describe("spec 10: multi-server orchestration", () => {
  it("R10-1 one execution imports several @codemode/servers/* modules and composes calls across them", async () => {
    const r = await http.run(COMPOSE);
    expect(r).toMatchObject({ result: { n: 42, item: "item:42", echoed: "Echo: item:42" }, diagnostics: [] });
    expect(r.toolTrace!.map((t) => `${t.serverId}:${t.toolName}`)).toEqual(["everything:get-sum", "fixture:get-item", "everything:echo"]);
  });

  it("R10-2 a failing server call is a ToolCallError thrown as a normal exception; the script goes on", async () => {
    const r = await http.run(`
      import * as everything from "@codemode/servers/everything";
      import * as fixture from "@codemode/servers/fixture";
      import { ToolCallError } from "@codemode/errors";
      const results = await Promise.allSettled([fixture.fail({ reason: "quota" }), everything.echo({ message: "fine" })]);
      const [bad, good] = results;
      globalThis.__codemode_result__ = [bad.status, bad.reason instanceof ToolCallError, bad.reason.serverId, good.value];`);
    expect(r.result).toEqual(["rejected", true, "fixture", "Echo: fine"]);
    expect(r.diagnostics).toEqual([]);
  });

  it("R10-3 the host does not abort the script for a failed call (only a limit does)", async () => {
    const r = await http.run(`
      import * as fixture from "@codemode/servers/fixture";
      const floating = fixture.fail({ reason: "never awaited" });
      floating.catch(() => {});
      fixture.fail({ reason: "unhandled" });
      await new Promise((ok) => setTimeout(ok, 100));
      globalThis.__codemode_result__ = "still running";`);
    expect(r.result).toBe("still running");
    expect(r.toolTrace!.filter((t) => !t.ok)).toHaveLength(2);
  });

  it("R10.1-1 tool calls within one script run concurrently (Promise.all)", async () => {
    await http.run(`import { stats } from "@codemode/servers/fixture"; await stats({ reset: true });`);
    const r = await http.run(`
      import * as fixture from "@codemode/servers/fixture";
      import * as everything from "@codemode/servers/everything";
      const out = await Promise.all([fixture.slow({ ms: 600, tag: "a" }), fixture.slow({ ms: 600, tag: "b" }), fixture.slow({ ms: 600, tag: "c" }), everything.echo({ message: "x" })]);
      globalThis.__codemode_result__ = { out, stats: await fixture.stats({}) };`);
    const res = r.result as { out: string[]; stats: { maxConcurrent: number } };
    expect(res.out).toEqual(["slept 600 a", "slept 600 b", "slept 600 c", "Echo: x"]);
    // Concurrent, by the server's own count: the three slow calls were in flight at once.
    expect(res.stats.maxConcurrent).toBe(3);
  });

  it("R10.1-2 the concurrency limit is documented (more calls wait their turn)", async () => {
    const d = (await http.tool()).description ?? "";
    expect(d).toMatch(/CONCURRENCY\. Calls may run concurrently .* at most 16 in flight; more wait their turn/);
    const r = await http.run(`
      import { get_item } from "@codemode/servers/fixture";
      const ids = Array.from({ length: 40 }, (_, i) => String(i));
      globalThis.__codemode_result__ = (await Promise.all(ids.map((id) => get_item({ id })))).length;`);
    expect(r.result).toBe(40);
  });

  it("R10-5 the front is a gateway like any other: the same composition on a remote sidecar and orchestrator", async () => {
    const stack = await startStack();
    const remote = await startStdioFront(undefined, ["--sandbox", stack.sandboxAddress, "--orchestrator", stack.orchestratorAddress]);
    try {
      const r = await remote.run(COMPOSE);
      expect(r.result).toEqual({ n: 42, item: "item:42", echoed: "Echo: item:42" });
      await logged(stack.proc, /"codemode\.run finished"/);
      expect(remote.stderr.some((l) => l.includes('"process":"sandbox"'))).toBe(false);
    } finally {
      await remote.close();
      await stack.stop();
    }
  });

  it("R10-6 a server that goes away fails only its own calls, as ToolCallError; the other servers' calls go on", async () => {
    const fixture = await startHttpFixture("tok");
    const f = await startStdioFront({ ...standardServers(), flaky: { url: fixture.url, headers: { Authorization: "Bearer tok" } } });
    try {
      const before = await f.run(`import { echo_v2 } from "@codemode/servers/flaky"; globalThis.__codemode_result__ = await echo_v2({ text: "up" });`);
      expect(before.result).toBe("up");
      await fixture.stop();
      const r = await f.run(`
        import * as flaky from "@codemode/servers/flaky";
        import * as everything from "@codemode/servers/everything";
        import { ToolCallError } from "@codemode/errors";
        let failed; try { await flaky.echo_v2({ text: "down" }); } catch (e) { failed = [e instanceof ToolCallError, e.serverId]; }
        globalThis.__codemode_result__ = { failed, other: await everything.echo({ message: "still here" }) };`);
      expect(r.result).toEqual({ failed: [true, "flaky"], other: "Echo: still here" });
    } finally {
      await f.close();
      await fixture.stop();
    }
  });

  it("R10-4 the same composition over stdio", async () => {
    const stdio = await startStdioFront();
    try {
      const r = await stdio.run(COMPOSE);
      expect(r.result).toEqual({ n: 42, item: "item:42", echoed: "Echo: item:42" });
    } finally {
      await stdio.close();
    }
  });
});
