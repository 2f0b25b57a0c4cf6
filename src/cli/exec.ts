/**
 * `codemode exec`: runs one program on a sidecar and prints each result as one JSON
 * line (the seed's shape). It opens a run for its own scope first (with no tools unless
 * given). With `--tools FILE.mjs` it is a small gateway: it registers the module's
 * namespaces, opens the run with its tools, MCP servers and `--allow`/`--deny` policy,
 * runs each nested call's handler, and answers with BridgeCallback. A `waiting` result is followed with `wait` calls, as
 * a model would, each result printed as it comes (a handler may finish long after the
 * exec returned). Exit status is 0 whenever a result came back. `--mode tool_search_code`
 * opens the run with Tool Search instead of code mode, so the program runs on that surface.
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { ResultStatus, ToolSource } from "../gen/codemode/common/v1/common_pb.js";
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox, type ExecEvent } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient } from "../protocol/grpc-client.js";
import { DEFAULT_ORCHESTRATOR_ADDRESS, DEFAULT_SANDBOX_ADDRESS, parseHostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import { toWireMcpServer, toWireTool } from "../shared/tool-wire.js";
import { clientSecurity, clientSecurityFlags, SECURITY_USAGE } from "./security-flags.js";
import { loadToolsModule, type CliTool, type ToolsModule } from "./tools-module.js";
import { UsageError } from "./usage-error.js";

const USAGE = `usage: codemode exec (--code STRING | FILE | -) [--language javascript|typescript]
                     [--sandbox HOST:PORT] [--orchestrator HOST:PORT] [--timeout-ms N]
                     [--tools FILE.mjs] [--allow PATTERN]... [--deny PATTERN]...
                     [--max-waits N] [--mode code|tool_search_code]
                     ${SECURITY_USAGE.client}`;

/** Waits followed by default before giving up on a run that keeps waiting. */
const DEFAULT_MAX_WAITS = 20;

export { UsageError } from "./usage-error.js";

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function errorOf(err: unknown): { name: string; message: string } {
  if (err instanceof Error) return { name: err.name || "Error", message: err.message };
  return { name: "Error", message: typeof err === "string" ? err : (JSON.stringify(err) ?? String(err)) };
}

export async function runExec(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        code: { type: "string" },
        language: { type: "string" },
        sandbox: { type: "string", default: DEFAULT_SANDBOX_ADDRESS },
        orchestrator: { type: "string", default: DEFAULT_ORCHESTRATOR_ADDRESS },
        "timeout-ms": { type: "string" },
        tools: { type: "string" },
        allow: { type: "string", multiple: true },
        deny: { type: "string", multiple: true },
        "max-waits": { type: "string" },
        mode: { type: "string", default: "code" },
        ...clientSecurityFlags,
      },
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  let code: string;
  if (values.code !== undefined) {
    if (positionals.length > 0) throw new UsageError(`give --code or a file, not both\n${USAGE}`);
    code = values.code;
  } else if (positionals.length === 1) {
    code = positionals[0] === "-" ? await readStdin() : await readFile(positionals[0]!, "utf8");
  } else {
    throw new UsageError(USAGE);
  }
  parseHostPort(values.sandbox, "--sandbox");
  parseHostPort(values.orchestrator, "--orchestrator");
  // TLS and the gateway bearer token, for both the orchestrator and the sidecar.
  const security = clientSecurity(values);
  let timeoutMs: number | undefined;
  if (values["timeout-ms"] !== undefined) {
    timeoutMs = Number(values["timeout-ms"]);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
      throw new UsageError(`--timeout-ms must be a positive integer, got ${JSON.stringify(values["timeout-ms"])}`);
  }

  let maxWaits = DEFAULT_MAX_WAITS;
  if (values["max-waits"] !== undefined) {
    maxWaits = Number(values["max-waits"]);
    if (!Number.isInteger(maxWaits) || maxWaits < 0)
      throw new UsageError(`--max-waits must be a non-negative integer, got ${JSON.stringify(values["max-waits"])}`);
  }

  // --mode tool_search_code: the run's surface is Tool Search (the program sees openclaw.tools).
  const mode = values.mode;
  if (mode !== "code" && mode !== "tool_search_code")
    throw new UsageError(`--mode must be "code" or "tool_search_code", got ${JSON.stringify(mode)}\n${USAGE}`);
  const toolSearch =
    mode === "tool_search_code" ? { enabled: true, mode: "code", ...(timeoutMs !== undefined ? { codeTimeoutMs: timeoutMs } : {}) } : undefined;

  const scope = { agentId: "cli", sessionId: newId("sess", 8), sessionKey: "cli", agentRunId: newId("run", 8) };
  const module: ToolsModule = values.tools ? await loadToolsModule(values.tools) : { tools: [], mcpServers: [], namespaces: [] };
  const handlers = new Map<string, CliTool>();
  // Exec and Wait need an open run, with tools or without.
  const control = createClient(Control, values.orchestrator, {}, security);
  try {
    for (const ns of module.namespaces) await control.registerNamespace({ namespace: ns });
    await control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: module.tools.map(toWireTool), mcpServers: module.mcpServers.map(toWireMcpServer) } },
      policy: { allow: values.allow ?? [], deny: values.deny ?? [], allowNone: false },
      config: timeoutMs !== undefined ? { timeoutMs } : {},
      ...(toolSearch ? { toolSearch } : {}),
    });
  } finally {
    control.close();
  }
  for (const t of module.tools) handlers.set(`${t.source}\0${t.owner}\0${t.name}`, t);

  const sandbox = createClient(Sandbox, values.sandbox, {}, security);
  try {
    const answer = async (callId: string, tool: CliTool | undefined, inputJson: string) => {
      let outcome: { case: "resultJson"; value: string } | { case: "error"; value: { name: string; message: string } };
      try {
        if (!tool) throw new Error("this gateway has no handler for the tool");
        const value = await tool.handler(JSON.parse(inputJson) as unknown);
        outcome = { case: "resultJson", value: JSON.stringify(value === undefined ? null : value) };
      } catch (err) {
        outcome = { case: "error", value: errorOf(err) };
      }
      try {
        await sandbox.bridgeCallback({ scope, callId, outcome });
      } catch (err) {
        process.stderr.write(`codemode exec: could not answer tool call ${callId}: ${(err as Error).message}\n`);
      }
    };
    /** Follows one exec or wait stream; returns the code-mode run id when it is waiting. */
    const follow = async (stream: AsyncIterable<ExecEvent>): Promise<string | undefined> => {
      for await (const ev of stream) {
        if (ev.event.case === "toolCall") {
          const c = ev.event.value;
          const sourceName = c.source === ToolSource.MCP ? "mcp" : c.source === ToolSource.CLIENT ? "client" : "openclaw";
          void answer(c.callId, handlers.get(`${sourceName}\0${c.sourceName}\0${c.toolName}`), c.inputJson);
        } else if (ev.event.case === "result") {
          const r = ev.event.value;
          process.stdout.write(`${r.modelJson}\n`);
          return r.status === ResultStatus.WAITING ? r.codeModeRunId : "";
        }
      }
      throw new Error("the sandbox closed the stream without a result");
    };
    let codeModeRunId = await follow(
      sandbox.exec({
        scope,
        execCallId: newId("call", 8),
        code,
        ...(values.language !== undefined ? { language: values.language } : {}),
        config: timeoutMs !== undefined ? { timeoutMs } : {},
      }),
    );
    for (let waits = 0; codeModeRunId && waits < maxWaits; waits++) {
      codeModeRunId = await follow(sandbox.wait({ scope, waitCallId: newId("wait", 8), codeModeRunId }));
    }
    return 0;
  } finally {
    sandbox.close();
  }
}
