/**
 * Code Mode for MCP spec section 5: one `@codemode/servers/<path>` module per connected
 * server, the module path mapping and its `--N` disambiguation, the exports and
 * `__meta__`, the call shapes and the result unwrapping rules. Three copies of the fixture
 * server run under config names that normalize to the same path.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVERYTHING, FIXTURE, startStdioFront, type Front } from "../helpers/mcp-front.js";

let front: Front;
beforeAll(async () => {
  const fixture = (name: string) => ({ command: process.execPath, args: [FIXTURE, "--name", name] });
  front = await startStdioFront({
    "fixture-server": fixture("lower"),
    "Fixture Server": fixture("spaced"),
    "--FIXTURE..SERVER--": fixture("dotted"),
    everything: { command: process.execPath, args: [EVERYTHING, "stdio"] },
  });
});
afterAll(async () => {
  await front?.close();
});

describe("spec 5: generated per-server modules", () => {
  it("R5-1 every connected server is importable under @codemode/servers/", async () => {
    const r = await front.run(`
      import { listServers } from "@codemode/discovery";
      const ids = (await listServers()).map((s) => s.serverId);
      const mods = await Promise.all(ids.map((id) => import("@codemode/servers/" + id)));
      globalThis.__codemode_result__ = mods.map((m) => m.__meta__.serverId);`);
    expect(r.result).toEqual(["everything", "fixture-server", "fixture-server--2", "fixture-server--3"]);
  });

  it("R5.0.1-1 server ids are lower-cased, [^a-z0-9-] becomes -, runs of - collapse, edges are stripped", async () => {
    const r = await front.run(`import { __meta__ } from "@codemode/servers/fixture-server"; globalThis.__codemode_result__ = __meta__.serverId;`);
    expect(r.result).toBe("fixture-server");
  });

  it("R5.0.1-2 servers that normalize to the same path get --2, --3 (the first, in name order, keeps the clean path)", async () => {
    const r = await front.run(`
      import * as a from "@codemode/servers/fixture-server";
      import * as b from "@codemode/servers/fixture-server--2";
      import * as c from "@codemode/servers/fixture-server--3";
      globalThis.__codemode_result__ = [a, b, c].map((m) => m.__meta__.serverName);`);
    // Catalog names "--FIXTURE..SERVER--" < "Fixture_Server" < "fixture-server" (code units).
    expect(r.result).toEqual(["Fixture dotted", "Fixture spaced", "Fixture lower"]);
  });

  it("R5.0.1-3 the normalized path is what __meta__.serverId and discovery report", async () => {
    const r = await front.run(`
      import { listServers, searchTools } from "@codemode/discovery";
      import { __meta__ } from "@codemode/servers/fixture-server--2";
      const found = await searchTools("weather", { limit: 5 });
      globalThis.__codemode_result__ = [__meta__.serverId, (await listServers()).map((s) => s.serverId), [...new Set(found.results.map((x) => x.serverId))].sort()];`);
    expect(r.result).toEqual([
      "fixture-server--2",
      ["everything", "fixture-server", "fixture-server--2", "fixture-server--3"],
      ["fixture-server", "fixture-server--2", "fixture-server--3"],
    ]);
  });

  it("R5.1-1 a server module exports one async function per MCP tool and __meta__", async () => {
    const r = await front.run(`
      import * as ev from "@codemode/servers/everything";
      const fns = Object.keys(ev).filter((k) => k !== "__meta__");
      globalThis.__codemode_result__ = [fns.length === ev.__meta__.tools.length, fns.every((k) => typeof ev[k] === "function"), ev.echo({ message: "p" }) instanceof Promise, "__meta__" in ev];`);
    expect(r.result).toEqual([true, true, true, true]);
  });

  it("R5.2-1 __meta__ has serverId, serverName, serverVersion and tools [{toolName, exportName, description}]", async () => {
    const r = await front.run(`import { __meta__ } from "@codemode/servers/fixture-server"; globalThis.__codemode_result__ = __meta__;`);
    const meta = r.result as { serverId: string; serverName: string; serverVersion: string; tools: Array<Record<string, string>> };
    expect(meta).toMatchObject({ serverId: "fixture-server", serverName: "Fixture dotted", serverVersion: "3.1.4" });
    expect(meta.tools.find((t) => t.toolName === "echo.v2")).toEqual({
      toolName: "echo.v2",
      exportName: "echo_v2",
      description: "Echo with a dot in the name.",
    });
    for (const t of meta.tools) expect(Object.keys(t).every((k) => ["toolName", "exportName", "description"].includes(k))).toBe(true);
  });

  it("R5.3-1 a binding is called as await server.toolName(input)", async () => {
    const r = await front.run(`import * as fx from "@codemode/servers/fixture-server"; globalThis.__codemode_result__ = await fx.get_item({ id: "42" });`);
    expect(r.result).toBe("item:42");
  });

  it("R5.3.1-1 an object input schema takes one object argument; an empty schema takes no argument or {}", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture-server";
      import * as ev from "@codemode/servers/everything";
      globalThis.__codemode_result__ = [await fx.echo_v2({ text: "obj" }), await fx.get_item__2(), await fx.get_item__2({}), typeof (await ev.get_env())];`);
    expect(r.result).toEqual(["obj", "default item", "default item", "string"]);
  });

  it("R5.3.2-1 rule 1: structuredContent is returned and content is ignored", async () => {
    const r = await front.run(`import * as fx from "@codemode/servers/fixture-server"; globalThis.__codemode_result__ = await fx.weather({ city: "Lima" });`);
    expect(r.result).toEqual({ city: "Lima", tempC: 19 });
  });

  it("R5.3.2-2 rule 2: a single text block is returned as its string", async () => {
    const r = await front.run(
      `import * as fx from "@codemode/servers/fixture-server"; const t = await fx.json_text(); globalThis.__codemode_result__ = [typeof t, t];`,
    );
    expect(r.result).toEqual(["string", '{"a":1}']);
  });

  it("R5.3.2-3 rule 3: image or audio blocks return the whole MCP result, binary data as base64 strings", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture-server";
      import { get_tiny_image } from "@codemode/servers/everything";
      const img = await fx.image(), snd = await fx.audio(), tiny = await get_tiny_image();
      globalThis.__codemode_result__ = [img.content[0].type, typeof img.content[0].data, atob(img.content[0].data).slice(1, 4), snd.content.map((c) => c.type), tiny.content.some((c) => c.type === "image")];`);
    expect(r.result).toEqual(["image", "string", "PNG", ["text", "audio"], true]);
  });

  it("R5.3.2-4 rule 4: anything else returns the whole MCP result", async () => {
    const r = await front.run(`import * as fx from "@codemode/servers/fixture-server"; globalThis.__codemode_result__ = await fx.multi();`);
    expect(r.result).toEqual({
      content: [
        { type: "text", text: "one" },
        { type: "text", text: "two" },
      ],
    });
  });

  it("R5.3.2-5 the unwrapping rules and the non-object input edge case are documented in the description", async () => {
    const d = (await front.tool()).description ?? "";
    expect(d).toMatch(/UNWRAPPING\. A call returns, in this order: 1\) the result's `structuredContent`/);
    expect(d).toMatch(/non-object root type takes one value of that type/);
  });
});
