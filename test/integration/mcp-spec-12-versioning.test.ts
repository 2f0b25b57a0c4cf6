/**
 * Code Mode for MCP spec section 12: the host exposes the spec version it implements
 * inside the sandbox as a semver string (`specVersion` of `@codemode/discovery`), the
 * same one the `codemode.run` description names. Through `codemode mcp` over stdio.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStdioFront, type Front } from "../helpers/mcp-front.js";

let front: Front;
beforeAll(async () => {
  front = await startStdioFront({});
});
afterAll(async () => {
  await front?.close();
});

// semver.org's recommended regular expression.
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

describe("spec 12: versioning", () => {
  it('R12.1-1 the version is exposed inside the sandbox: import { specVersion } from "@codemode/discovery"', async () => {
    const r = await front.run(`import { specVersion } from "@codemode/discovery"; globalThis.__codemode_result__ = specVersion;`);
    expect(typeof r.result).toBe("string");
  });

  it("R12.1-2 specVersion is a semver string", async () => {
    const r = await front.run(`import { specVersion } from "@codemode/discovery"; globalThis.__codemode_result__ = specVersion;`);
    expect(r.result).toMatch(SEMVER);
    expect(r.result).toBe("1.0.0");
  });

  it("R12.1-3 the description names the same version, and a host with no server still serves codemode.run", async () => {
    const d = (await front.tool()).description ?? "";
    expect(d).toContain('specVersion "1.0.0"');
    expect(d).toContain("(no MCP server is connected now)");
  });
});
