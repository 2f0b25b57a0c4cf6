/**
 * Code Mode for MCP spec section 8: tool list changes. The fixture server adds a tool at
 * run time and sends `notifications/tools/list_changed`; the front lists its tools again,
 * registers the new catalog, and tells its own clients that `codemode.run` changed. The
 * next invocation sees the new tool; the invocation in flight keeps the tool set it
 * started with. Once over stdio, once over streamable HTTP.
 */
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHttpFront, startStdioFront, type Front } from "../helpers/mcp-front.js";
import { until } from "../helpers/until.js";

let front: Front;
let http: Front;
const notified = { stdio: 0, http: 0 };
beforeAll(async () => {
  [front, http] = await Promise.all([startStdioFront(), startHttpFront()]);
  front.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void notified.stdio++);
  http.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void notified.http++);
}, 90_000);
afterAll(async () => {
  await Promise.all([front?.close(), http?.close()]);
});

describe("spec 8: tool list changes", () => {
  it("R8-1 a server declaring tools.listChanged gets its tool index refreshed", async () => {
    const caps = await front.run(`globalThis.__codemode_result__ = "ok";`);
    expect(caps.result).toBe("ok");
    await front.run(`import { add_tool } from "@codemode/servers/fixture"; await add_tool({ name: "fresh_tool" });`);
    const r = await front.run(
      `import { listTools } from "@codemode/discovery"; globalThis.__codemode_result__ = (await listTools("fixture", { detail: "name" })).some((t) => t.toolName === "fresh_tool");`,
    );
    expect(r.result).toBe(true);
  });

  it("R8.1-1 the refresh happens before the next invocation that imports the server module", async () => {
    await front.run(`import { add_tool } from "@codemode/servers/fixture"; await add_tool({ name: "next-run.tool" });`);
    // Immediately after: the very next run links the new export statically.
    const r = await front.run(`import { next_run_tool } from "@codemode/servers/fixture"; globalThis.__codemode_result__ = await next_run_tool();`);
    expect(r).toMatchObject({ result: "dynamic next-run.tool", diagnostics: [] });
  });

  it("R8.1-2 the codemode.run declarations are refreshed and MCP clients are told (notifications/tools/list_changed)", async () => {
    const before = notified.stdio;
    await front.run(`import { add_tool } from "@codemode/servers/fixture"; await add_tool({ name: "announced" });`);
    await until(() => notified.stdio > before, "notifications/tools/list_changed over stdio");
    expect((await front.tool()).description).toContain("export function announced(");
  });

  it("R8.2-1 a change does not affect the tool set visible inside an in-flight execution; the next one sees it", async () => {
    const inflight = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      import { listTools } from "@codemode/discovery";
      await fx.add_tool({ name: "while_running" });
      await new Promise((ok) => setTimeout(ok, 500));
      const again = await import("@codemode/servers/fixture");
      globalThis.__codemode_result__ = [
        "while_running" in fx, "while_running" in again,
        again.__meta__.tools.some((t) => t.toolName === "while_running"),
        (await listTools("fixture", { detail: "name" })).some((t) => t.toolName === "while_running"),
      ];`);
    expect(inflight.result).toEqual([false, false, false, false]);
    const next = await front.run(`import { while_running } from "@codemode/servers/fixture"; globalThis.__codemode_result__ = await while_running();`);
    expect(next.result).toBe("dynamic while_running");
  });

  it("R8-2 over streamable HTTP: the refresh, the client notification and the next run's tool set", async () => {
    const before = notified.http;
    await http.run(`import { add_tool } from "@codemode/servers/fixture"; await add_tool({ name: "over_http" });`);
    const r = await http.run(`import { over_http } from "@codemode/servers/fixture"; globalThis.__codemode_result__ = await over_http();`);
    expect(r.result).toBe("dynamic over_http");
    await until(() => notified.http > before, "notifications/tools/list_changed over http");
  });
});
