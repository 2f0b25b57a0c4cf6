/**
 * The `codemode` command as a user runs it: `exec` with --code, a file and stdin,
 * `--tools` as a small gateway with `--allow`/`--deny`, exit statuses, and usage errors;
 * `surface` computed in-process against the same flags answered by a running service.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, startStack, type Stack } from "../helpers/harness.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

function cli(args: string[], input?: string) {
  const r = spawnSync(process.execPath, [BIN, "exec", "--sandbox", stack.sandboxAddress, "--orchestrator", stack.orchestratorAddress, ...args], {
    cwd: root,
    input,
    encoding: "utf8",
    timeout: 30_000,
  });
  const lines = r.stdout.trim().split("\n").filter(Boolean);
  return { status: r.status, stderr: r.stderr, results: lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("codemode exec", () => {
  it("--code prints one completed result with value 2 and exits 0", () => {
    const r = cli(["--code", "return 1+1"]);
    expect(r.status).toBe(0);
    expect(r.results).toHaveLength(1);
    expect(r.results[0]).toMatchObject({ status: "completed", value: 2 });
  });
  it("follows a waiting result with wait calls, printing each result, until the slow tool's answer completes the run", () => {
    const r = cli(["--tools", "examples/tools.mjs", "--timeout-ms", "500", "examples/slow-tool.js"]);
    expect(r.status).toBe(0);
    expect(r.results.length).toBeGreaterThanOrEqual(2);
    const [first, ...rest] = r.results;
    expect(first).toMatchObject({ status: "waiting", reason: "pending_tools", output: [{ type: "text", text: "asking for the report" }] });
    expect((first!.telemetry as { snapshotBytes: number }).snapshotBytes).toBeGreaterThan(0);
    expect(rest.slice(0, -1).every((x) => x.status === "waiting" && x.runId === first!.runId)).toBe(true);
    expect(rest.at(-1)).toMatchObject({
      status: "completed",
      value: { topic: "code mode", pages: 3 },
      output: [{ type: "text", text: "the report has 3 pages" }],
    });
  });
  it("with --await-results, the slow tool's answer completes the exec itself: one result, no wait", () => {
    const r = cli(["--tools", "examples/tools.mjs", "--timeout-ms", "500", "--await-results", "examples/slow-tool.js"]);
    expect(r.status).toBe(0);
    expect(r.results).toHaveLength(1);
    expect(r.results[0]).toMatchObject({
      status: "completed",
      value: { topic: "code mode", pages: 3 },
      output: [
        { type: "text", text: "asking for the report" },
        { type: "text", text: "the report has 3 pages" },
      ],
    });
  });
  it("exits 0 for a failed result too", () => {
    const r = cli(["--timeout-ms", "300", "--code", "while(true){}"]);
    expect(r.status).toBe(0);
    expect(r.results[0]).toMatchObject({ status: "failed", code: "timeout" });
  });
  it("reads a file, and stdin with -", () => {
    expect(cli(["examples/notes.ts", "--language", "typescript", "--tools", "examples/tools.mjs"]).results[0]).toMatchObject({
      status: "completed",
      value: [{ key: "welcome" }, { key: "todo", text: "ship code mode" }],
      output: [{ type: "text", text: "skipped missing: no note named missing" }],
    });
    expect(cli(["-"], "return 'from stdin'").results[0]).toMatchObject({ value: "from stdin" });
  });
  it("--tools: search, describe and call complete in one exec", () => {
    const r = cli(["--tools", "examples/tools.mjs", "examples/search-describe-call.js"]);
    expect(r.results[0]).toMatchObject({ status: "completed", value: { city: "Lisbon" }, telemetry: { searchCount: 1, describeCount: 1, callCount: 1 } });
  });
  it("--tools: a module exporting mcpServers and namespaces runs examples/mcp-and-namespaces.js, each call reaching its backing tool", async () => {
    // examples/tools.mjs as the gateway, each handler wrapped to log the call it answers.
    const dir = mkdtempSync(join(tmpdir(), "cm-cli-ns-"));
    const log = join(dir, "calls.jsonl");
    const file = join(dir, "tools.mjs");
    writeFileSync(
      file,
      `import { appendFileSync } from "node:fs";
       import tools, { mcpServers, namespaces } from ${JSON.stringify(pathToFileURL(join(root, "examples/tools.mjs")).href)};
       export { mcpServers, namespaces };
       export default tools.map((t) => ({ ...t, handler: async (input) => {
         appendFileSync(${JSON.stringify(log)}, JSON.stringify({ name: t.name, input }) + "\\n");
         return t.handler(input);
       } }));`,
    );
    writeFileSync(log, "");
    const r = cli(["--tools", file, "examples/mcp-and-namespaces.js"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.results).toHaveLength(1);
    expect(r.results[0]).toMatchObject({
      status: "completed",
      value: {
        files: ["mcp/index.d.ts", "mcp/tracker.d.ts"],
        declares: true,
        ticket: "ticket #7: Login fails on Safari (high)",
        triage: ["triage"],
        session: true,
      },
      telemetry: { callCount: 3, sources: { openclaw: 8, mcp: 2, client: 1 } },
    });
    // MCP.tracker.createTicket reached create_issue's MCP tool; Notes.append(key, line) and
    // Notes.list(prefix) reached the notes plugin's tools with their marker-mapped inputs.
    const calls = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as unknown);
    expect(calls).toEqual([
      { name: "create_ticket", input: { title: "Login fails on Safari", priority: "high" } },
      { name: "note_append", input: { key: "triage", line: "opened ticket 7" } },
      { name: "note_list", input: { prefix: "tri" } },
    ]);
    // The CLI registered the namespace on the orchestrator with its scope as wire JSON.
    const registered = (await stack.control.listNamespaces({})).namespaces.find((n) => n.id === "notes-api");
    expect(registered).toMatchObject({ pluginId: "notes", globalName: "Notes" });
    expect([...registered!.requiredToolNames].sort()).toEqual(["note_append", "note_list"]);
    expect(JSON.parse(registered!.scopeJson)).toEqual({
      session: { $context: "sessionId" },
      list: { $tool: "note_list", args: ["prefix"] },
      append: { $tool: "note_append", args: ["key", "line"] },
    });
  });
  it("--tools: 16 parallel calls complete", () => {
    const r = cli(["--tools", "examples/tools.mjs", "examples/parallel.js"]);
    expect(r.results[0]).toMatchObject({ status: "completed", value: 1240 });
  });
  it("--deny: a denied tool cannot be found or called by id", () => {
    const code = `const found = (await tools.search("dangerous delete everything")).map((t) => t.id);
      try { await tools.call("openclaw:core:delete_everything", {}); return "called" } catch (e) { return { found, error: e.message } }`;
    const r = cli(["--tools", "examples/tools.mjs", "--deny", "delete_*", "--code", code]);
    expect(r.results[0]).toMatchObject({ status: "completed" });
    const v = r.results[0]!.value as { found: string[]; error: string };
    expect(v.found).not.toContain("openclaw:core:delete_everything");
    expect(v.error).toMatch(/unknown tool id/);
  });
  it("usage errors exit 2 with a message", () => {
    const r = cli([]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/usage: codemode exec/);
    expect(cli(["--timeout-ms", "soon", "--code", "1"]).status).toBe(2);
  });
  it("an unreachable sandbox exits 1", () => {
    const r = spawnSync(process.execPath, [BIN, "exec", "--sandbox", "127.0.0.1:1", "--code", "return 1"], { encoding: "utf8", timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/codemode:/);
  });
});

describe("codemode exec: tools that need approval", () => {
  const CATCH = 'try { return await tools.delete_everything({}) } catch (e) { return e.name + ": " + e.message }';
  /** A copy of examples/tools.mjs whose handlers log each call they run to a file. */
  function loggedTools() {
    const dir = mkdtempSync(join(tmpdir(), "cm-cli-approval-"));
    const log = join(dir, "calls.jsonl");
    const file = join(dir, "tools.mjs");
    writeFileSync(
      file,
      `import { appendFileSync } from "node:fs";
       import tools, { mcpServers, namespaces } from ${JSON.stringify(pathToFileURL(join(root, "examples/tools.mjs")).href)};
       export { mcpServers, namespaces };
       export default tools.map((t) => ({ ...t, handler: async (input) => {
         appendFileSync(${JSON.stringify(log)}, t.name + "\\n");
         return t.handler(input);
       } }));`,
    );
    writeFileSync(log, "");
    return { file, ran: () => readFileSync(log, "utf8").split("\n").filter(Boolean) };
  }
  /**
   * The last result is final; any before it waited for the decision (the run may suspend as
   * soon as its call awaits approval: reason "approval", or "pending_tools" when the decision
   * landed while it was suspending and is kept with the run).
   */
  function final(results: Array<Record<string, unknown>>) {
    for (const r of results.slice(0, -1)) expect(r).toMatchObject({ status: "waiting", reason: expect.stringMatching(/^(approval|pending_tools)$/) });
    return results.at(-1);
  }

  it("--approve runs the handler after the approval; --deny-approvals denies with ApprovalDenied and never runs it", () => {
    const tools = loggedTools();
    const approved = cli(["--tools", tools.file, "--approve", "--code", "return await tools.delete_everything({})"]);
    expect(approved.status, approved.stderr).toBe(0);
    expect(final(approved.results)).toMatchObject({ status: "completed", value: { deleted: "everything" } });
    expect(tools.ran()).toEqual(["delete_everything"]);
    const denied = cli(["--tools", tools.file, "--deny-approvals", "--code", CATCH]);
    expect(denied.status, denied.stderr).toBe(0);
    expect(final(denied.results)).toMatchObject({ status: "completed", value: "ApprovalDenied: denied by codemode exec --deny-approvals" });
    expect(tools.ran()).toEqual(["delete_everything"]); // not a second time
    // Tools without needsApproval are not asked about.
    expect(cli(["--tools", tools.file, "--deny-approvals", "--code", "return (await tools.weather({ city: 'Oslo' })).city"]).results).toMatchObject([
      { status: "completed", value: "Oslo" },
    ]);
  });
  it("without a terminal and without --approve or --deny-approvals, denies and says why", () => {
    const tools = loggedTools();
    const r = cli(["--tools", tools.file, "--code", CATCH]);
    expect(r.status, r.stderr).toBe(0);
    expect(final(r.results)).toMatchObject({ status: "completed", value: expect.stringMatching(/^ApprovalDenied: denied: .*no terminal.*--approve/) });
    expect(r.stderr).toMatch(/denied delete_everything: no terminal to ask on \(pass --approve or --deny-approvals\)/);
    expect(tools.ran()).toEqual([]);
  });
  it("--approve with --deny-approvals is a usage error", () => {
    const r = cli(["--approve", "--deny-approvals", "--code", "return 1"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/give --approve or --deny-approvals, not both/);
  });
  it("on a terminal: asks, the exec returns waiting with reason approval, and y resumes the run with wait", async () => {
    // util-linux `script` gives the CLI a pseudo-terminal: stdin is a TTY, so it asks.
    const tools = loggedTools();
    const q = (a: string) => `'${a.replaceAll("'", "'\\''")}'`;
    const args = [process.execPath, BIN, "exec", "--sandbox", stack.sandboxAddress, "--orchestrator", stack.orchestratorAddress];
    const command = [...args, "--tools", tools.file, "--timeout-ms", "1000", "--code", "const r = await tools.delete_everything({}); return r"]
      .map(q)
      .join(" ");
    const child = spawn("script", ["-q", "-e", "-c", command, "/dev/null"], {
      cwd: root,
      env: { ...process.env, TERM: "dumb" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    /** The JSON results printed so far (a result may share its line with the prompt; a line still arriving is left out). */
    const results = () =>
      output.split(/\r?\n/).flatMap((line) => {
        const at = line.indexOf('{"status"');
        try {
          return at < 0 ? [] : [JSON.parse(line.slice(at).trim()) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
    try {
      const deadline = Date.now() + 20_000;
      while (!(output.includes("[y/N]") && results().some((r) => r.status === "waiting")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(output).toContain("approve delete_everything {} (it deletes everything)? [y/N]");
      const [waiting] = results();
      expect(waiting).toMatchObject({
        status: "waiting",
        reason: "approval",
        pendingToolCalls: [{ awaitingApproval: true, approvalReason: "it deletes everything" }],
      });
      expect(tools.ran()).toEqual([]); // nothing ran before the answer
      child.stdin.write("y\n");
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exited;
      clearTimeout(timer);
      expect(code, output).toBe(0);
      expect(results().at(-1)).toMatchObject({ status: "completed", value: { deleted: "everything" } });
      expect(tools.ran()).toEqual(["delete_everything"]);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 60_000);
});

describe("codemode surface", () => {
  const surface = (args: string[]) => spawnSync(process.execPath, [BIN, "surface", ...args], { cwd: root, encoding: "utf8", timeout: 30_000 });

  it("without --orchestrator prints, with no service to reach, what a running service reports for the same flags", () => {
    // The stack listens on ports of its own (127.0.0.1:0), never on the old default 127.0.0.1:7301.
    const cases = [
      ["--mode", "code"],
      ["--mode", "code", "--tools", "examples/tools.mjs", "--deny", "delete_*"],
      ["--mode", "tool_search_code", "--tools", "examples/tools.mjs"],
      ["--mode", "tool_search", "--tools", "examples/tools.mjs"],
      ["--mode", "direct", "--tools", "examples/tools.mjs", "--allow", "note_*"],
    ];
    for (const flags of cases) {
      const local = surface(flags);
      expect(local.status, local.stderr).toBe(0);
      expect(local.stderr).toBe("");
      const served = surface([...flags, "--orchestrator", stack.orchestratorAddress]);
      expect(served.status, served.stderr).toBe(0);
      expect(local.stdout, flags.join(" ")).toBe(served.stdout);
    }
    const direct = JSON.parse(surface(cases[4]!).stdout) as { surface: string; tools: Array<{ name: string }> };
    expect(direct.surface).toBe("direct");
    expect(direct.tools.map((t) => t.name).sort()).toEqual(["note_append", "note_list", "note_read", "note_write"]);
  });
  it("--help says so; the connection flags without --orchestrator are a usage error", () => {
    const help = surface(["--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/Without --orchestrator, the surface is computed in this process/);
    const r = surface(["--mode", "code", "--tls-ca", "ca.pem"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/the connection flags \(--tls-ca\) need --orchestrator/);
  });
});
