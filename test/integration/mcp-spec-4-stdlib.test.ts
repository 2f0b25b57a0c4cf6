/**
 * Code Mode for MCP spec section 4: the in-sandbox standard library. `@codemode/discovery`
 * (its exports, data types, options and detail levels), the TypeScript declarations
 * injected into the agent's context, and `@codemode/errors`. Through `codemode mcp` over
 * stdio with server-everything and the fixture server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { declarationsOf, startStdioFront, type Front } from "../helpers/mcp-front.js";
import { typecheck } from "../helpers/typecheck.js";

let front: Front;
beforeAll(async () => {
  front = await startStdioFront();
});
afterAll(async () => {
  await front?.close();
});

describe("spec 4: @codemode/* modules", () => {
  it("R4-1 the sandbox provides a stable set of built-in modules under @codemode/*", async () => {
    const r = await front.run(`
      const d = await import("@codemode/discovery"), e = await import("@codemode/errors");
      globalThis.__codemode_result__ = [Object.keys(d), Object.keys(e), Object.prototype.toString.call(d)];`);
    expect(r.result).toEqual([
      ["describeServer", "getTool", "listServers", "listTools", "searchTools", "specVersion"],
      ["AuthenticationError", "CodemodeError", "SandboxLimitError", "SchemaValidationError", "ServerNotFoundError", "ToolCallError", "ToolNotFoundError"],
      "[object Module]",
    ]);
  });

  it("R4.1-1 @codemode/discovery exports specVersion and the five async discovery functions", async () => {
    const r = await front.run(`
      import * as d from "@codemode/discovery";
      const fns = ["listServers", "describeServer", "listTools", "getTool", "searchTools"];
      globalThis.__codemode_result__ = [typeof d.specVersion, fns.map((f) => typeof d[f]), d.listServers() instanceof Promise];`);
    expect(r.result).toEqual(["string", ["function", "function", "function", "function", "function"], true]);
  });

  it("R4.2.1-1 listServers returns ServerInfo {serverId, serverName, capabilities}", async () => {
    const r = await front.run(`import { listServers } from "@codemode/discovery"; globalThis.__codemode_result__ = await listServers();`);
    expect(r.result).toEqual([
      { serverId: "everything", serverName: "Everything Reference Server", capabilities: ["tools", "resources", "prompts"] },
      { serverId: "fixture", serverName: "Fixture fixture-server", capabilities: ["tools"] },
    ]);
  });

  it("R4.2.2-1 describeServer returns ServerDescription with description and version", async () => {
    const r = await front.run(`import { describeServer } from "@codemode/discovery"; globalThis.__codemode_result__ = await describeServer("fixture");`);
    expect(r.result).toMatchObject({
      serverId: "fixture",
      serverName: "Fixture fixture-server",
      capabilities: ["tools"],
      version: "3.1.4",
      description: expect.stringContaining("fixture server"),
    });
  });

  it('R4.2.3-1 R4.2.6-1 listTools defaults to detail "description": ToolSummary fields (toolName, exportName, description, annotations)', async () => {
    const r = await front.run(
      `import { listTools } from "@codemode/discovery"; globalThis.__codemode_result__ = (await listTools("fixture")).filter((t) => ["delete", "get_item"].includes(t.toolName));`,
    );
    expect(r.result).toEqual([
      {
        toolName: "delete",
        exportName: "delete_",
        description: "Delete an item.",
        annotations: { destructiveHint: true, readOnlyHint: false, idempotentHint: true },
      },
      { toolName: "get_item", exportName: "get_item__2", description: "Get the default item (underscore)." },
    ]);
  });

  it("R4.2.4-1 getTool returns a ToolDefinition with inputSchema and outputSchema", async () => {
    const r = await front.run(`import { getTool } from "@codemode/discovery"; globalThis.__codemode_result__ = await getTool("fixture", "weather");`);
    expect(r.result).toMatchObject({
      toolName: "weather",
      exportName: "weather",
      description: "Weather with structured content.",
      inputSchema: { type: "object", properties: { city: { enum: ["Oslo", "Lima"] } } },
      outputSchema: { type: "object", required: ["city", "tempC"] },
    });
  });

  it("R4.2.5-1 searchTools returns {query, results} whose results carry serverId", async () => {
    const r = await front.run(
      `import { searchTools } from "@codemode/discovery"; globalThis.__codemode_result__ = await searchTools("weather city temperature");`,
    );
    const s = r.result as { query: string; results: Array<{ serverId: string; toolName: string }> };
    expect(s.query).toBe("weather city temperature");
    expect(s.results[0]).toMatchObject({ serverId: "fixture", toolName: "weather" });
    for (const x of s.results) expect(typeof x.serverId).toBe("string");
  });

  it("R4.2.7-1 searchTools takes serverId and limit; limit defaults to the host maximum (20)", async () => {
    const r = await front.run(`
      import { searchTools } from "@codemode/discovery";
      const only = await searchTools("get", { serverId: "everything", limit: 3 });
      const all = await searchTools("");
      globalThis.__codemode_result__ = [only.results.length, [...new Set(only.results.map((x) => x.serverId))], all.results.length];`);
    expect(r.result).toEqual([3, ["everything"], 20]);
  });

  it('R4.3-1 detail "name" returns only toolName and exportName (listTools and searchTools)', async () => {
    const r = await front.run(`
      import { listTools, searchTools } from "@codemode/discovery";
      const l = await listTools("fixture", { detail: "name" });
      const s = await searchTools("echo", { detail: "name", limit: 2 });
      globalThis.__codemode_result__ = [...new Set(l.map((t) => Object.keys(t).join())), ...new Set(s.results.map((t) => Object.keys(t).sort().join()))];`);
    expect(r.result).toEqual(["toolName,exportName", "exportName,serverId,toolName"]);
  });

  it('R4.3-2 detail "description" adds description and annotations, "full" adds inputSchema and outputSchema', async () => {
    const r = await front.run(`
      import { listTools, searchTools } from "@codemode/discovery";
      const desc = (await searchTools("echo", { serverId: "everything", limit: 1 })).results[0];
      const full = (await searchTools("echo", { serverId: "everything", limit: 1, detail: "full" })).results[0];
      const listed = (await listTools("fixture", { detail: "full" })).find((t) => t.toolName === "weather");
      globalThis.__codemode_result__ = [Object.keys(desc).sort(), Object.keys(full).sort(), Object.keys(listed).sort()];`);
    expect(r.result).toEqual([
      ["annotations", "description", "exportName", "serverId", "toolName"],
      ["annotations", "description", "exportName", "inputSchema", "serverId", "toolName"],
      ["description", "exportName", "inputSchema", "outputSchema", "toolName"],
    ]);
  });

  it("R4.4-1 TypeScript declarations for every connected server cover all exported bindings and type-check", async () => {
    const d = declarationsOf((await front.tool()).description ?? "");
    const meta = await front.run(`
      import * as a from "@codemode/servers/everything"; import * as b from "@codemode/servers/fixture";
      globalThis.__codemode_result__ = [...a.__meta__.tools, ...b.__meta__.tools].map((t) => t.exportName);`);
    const names = meta.result as string[];
    // Both servers' bindings are listed (so the loop below checks something).
    expect(names).toEqual(expect.arrayContaining(["get_sum", "echo_v2", "weather"]));
    for (const name of names) expect(d).toMatch(new RegExp(`export function ${name.replace(/\$/g, "\\$")}\\(`));
    expect(d).toContain('declare module "@codemode/servers/everything"');
    expect(d).toContain('declare module "@codemode/servers/fixture"');
    const script = `import * as fx from "@codemode/servers/fixture";
import { listTools } from "@codemode/discovery";
import { ToolCallError } from "@codemode/errors";
export async function main(): Promise<number> {
  const w = await fx.weather({ city: "Oslo" });
  const tools = await listTools("fixture", { detail: "name" });
  // @ts-expect-error city must be one of the enum values
  await fx.weather({ city: "Paris" });
  // @ts-expect-error id is required
  await fx.get_item({});
  try { await fx.fail({}); } catch (e) { if (e instanceof ToolCallError) return e.hint.length; }
  return w.tempC + tools.length;
}
`;
    expect(typecheck({ "codemode.d.ts": d, "script.ts": script })).toEqual([]);
  });

  it("R4.5-1 @codemode/errors defines the standardized error classes", async () => {
    const r = await front.run(`
      import * as errors from "@codemode/errors";
      globalThis.__codemode_result__ = Object.entries(errors).map(([k, C]) => [k, typeof C, new C("m").name]);`);
    expect((r.result as unknown[][]).map((x) => x[0])).toEqual([
      "AuthenticationError",
      "CodemodeError",
      "SandboxLimitError",
      "SchemaValidationError",
      "ServerNotFoundError",
      "ToolCallError",
      "ToolNotFoundError",
    ]);
    for (const [k, t, n] of r.result as string[][]) expect([t, n]).toEqual(["function", k]);
  });
});
