/**
 * `codemode exec`: runs one program on a sidecar and prints each result as one JSON
 * line (the seed's shape). It opens a run for its own scope first (with no tools unless
 * given). With `--tools FILE.mjs` it is a small gateway: it registers the module's
 * namespaces, opens the run with its tools, MCP servers and `--allow`/`--deny` policy,
 * runs each nested call's handler, and answers with BridgeCallback. A `waiting` result is followed with `wait` calls, as
 * a model would, each result printed as it comes (a handler may finish long after the
 * exec returned). Exit status is 0 whenever a result came back. `--mode tool_search_code`
 * opens the run with Tool Search instead of code mode, so the program runs on that surface.
 * A tool with `needsApproval` is answered "approval pending" first, then decided: asked on
 * the terminal, or `--approve` / `--deny-approvals`; its handler runs only once approved.
 */
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { ResultStatus, ToolSource, WaitReason } from "../gen/codemode/common/v1/common_pb.js";
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
                     [--approve | --deny-approvals] [--await-results] [--scope JSON]
                     ${SECURITY_USAGE.client}
A --tools tool with needsApproval is asked about on the terminal ("approve <tool> <input>? [y/N]")
before its handler runs; --approve approves every such call, --deny-approvals denies every one.
With neither and no terminal (stdin not a TTY, or the program read from it), each is denied.`;

/** `--scope JSON`: any of agentId, sessionId, sessionKey, agentRunId (strings); the rest are the exec's own. */
function scopeFlag(text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--scope is not JSON: ${(err as Error).message}`);
  }
  const out: Record<string, string> = {};
  for (const k of ["agentId", "sessionId", "sessionKey", "agentRunId"]) {
    const v = (parsed as Record<string, unknown> | null)?.[k];
    if (v === undefined) continue;
    if (typeof v !== "string" || !v) throw new UsageError(`--scope ${k} must be a non-empty string`);
    out[k] = v;
  }
  return out;
}

/** Waits followed by default before giving up on a run that keeps waiting. */
const DEFAULT_MAX_WAITS = 20;

export { UsageError } from "./usage-error.js";

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** An answer to a nested call, as BridgeCallback takes it. */
type Outcome =
  | { case: "resultJson"; value: string }
  | { case: "error"; value: { name: string; message: string } }
  | { case: "approvalPending"; value: { reason: string } }
  | { case: "approvalDenied"; value: { message: string } };

/** Asks one yes/no question on the terminal (stderr); the end of stdin is a no. */
function askTerminal(question: string): Promise<boolean> {
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    let answered = false;
    rl.once("close", () => {
      if (!answered) resolve(false);
    });
    rl.question(question, (answer) => {
      answered = true;
      rl.close();
      resolve(/^y(es)?$/i.test(answer.trim()));
    });
  });
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
        approve: { type: "boolean", default: false },
        "await-results": { type: "boolean", default: false },
        scope: { type: "string" },
        "deny-approvals": { type: "boolean", default: false },
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

  if (values.approve && values["deny-approvals"]) throw new UsageError(`give --approve or --deny-approvals, not both\n${USAGE}`);
  // Who decides the calls of tools that need approval: the flags, else the person at the terminal.
  const interactive = process.stdin.isTTY === true && positionals[0] !== "-";
  let questions: Promise<unknown> = Promise.resolve();
  const decide = async (tool: CliTool, inputJson: string, reason: string): Promise<true | string> => {
    if (values.approve) return true;
    if (values["deny-approvals"]) return "denied by codemode exec --deny-approvals";
    if (!interactive) {
      process.stderr.write(`codemode exec: denied ${tool.name}: no terminal to ask on (pass --approve or --deny-approvals)\n`);
      return "denied: codemode exec had no terminal to ask on (it takes --approve or --deny-approvals)";
    }
    // One question at a time: parallel calls wait their turn.
    const asked = questions.then(() => askTerminal(`approve ${tool.name} ${inputJson}${reason ? ` (${reason})` : ""}? [y/N] `));
    questions = asked.catch(() => false);
    return (await asked) ? true : "denied at the terminal";
  };

  // The run's scope: its own unless --scope names one (to export or replay the run later: codemode replay).
  const scope = { agentId: "cli", sessionId: newId("sess", 8), sessionKey: "cli", agentRunId: newId("run", 8), ...scopeFlag(values.scope) };
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
    /** Sends one answer; false when it was refused (said on stderr). */
    const send = async (callId: string, outcome: Outcome): Promise<boolean> => {
      try {
        await sandbox.bridgeCallback({ scope, callId, outcome });
        return true;
      } catch (err) {
        process.stderr.write(`codemode exec: could not answer tool call ${callId}: ${(err as Error).message}\n`);
        return false;
      }
    };
    const answer = async (callId: string, tool: CliTool | undefined, inputJson: string) => {
      if (tool?.needsApproval) {
        // Approval pending first (the call stays pending, the run may suspend), then the decision.
        const reason = typeof tool.needsApproval === "string" ? tool.needsApproval : "";
        if (!(await send(callId, { case: "approvalPending", value: { reason } }))) return;
        const decision = await decide(tool, inputJson, reason);
        if (decision !== true) {
          await send(callId, { case: "approvalDenied", value: { message: decision } });
          return;
        }
      }
      let outcome: Outcome;
      try {
        if (!tool) throw new Error("this gateway has no handler for the tool");
        const value = await tool.handler(JSON.parse(inputJson) as unknown);
        outcome = { case: "resultJson", value: JSON.stringify(value === undefined ? null : value) };
      } catch (err) {
        outcome = { case: "error", value: errorOf(err) };
      }
      await send(callId, outcome);
    };
    /** Answers of calls that needed approval, still being decided or run. */
    const approvals = new Set<Promise<void>>();
    /** Follows one exec or wait stream; returns the code-mode run id when it is waiting ("" otherwise). */
    const follow = async (stream: AsyncIterable<ExecEvent>): Promise<{ runId: string; approval: boolean }> => {
      for await (const ev of stream) {
        if (ev.event.case === "toolCall") {
          const c = ev.event.value;
          const sourceName = c.source === ToolSource.MCP ? "mcp" : c.source === ToolSource.CLIENT ? "client" : "openclaw";
          const tool = handlers.get(`${sourceName}\0${c.sourceName}\0${c.toolName}`);
          const answered = answer(c.callId, tool, c.inputJson);
          if (tool?.needsApproval) {
            approvals.add(answered);
            void answered.finally(() => approvals.delete(answered));
          }
        } else if (ev.event.case === "result") {
          const r = ev.event.value;
          process.stdout.write(`${r.modelJson}\n`);
          const waiting = r.status === ResultStatus.WAITING;
          return { runId: waiting ? r.codeModeRunId : "", approval: waiting && r.reason === WaitReason.APPROVAL };
        }
      }
      throw new Error("the sandbox closed the stream without a result");
    };
    let segment = await follow(
      sandbox.exec({
        scope,
        execCallId: newId("call", 8),
        code,
        ...(values.language !== undefined ? { language: values.language } : {}),
        config: timeoutMs !== undefined ? { timeoutMs } : {},
        // The exec stays open while the program waits on slow tools, instead of returning waiting.
        ...(values["await-results"] ? { awaitResults: true } : {}),
      }),
    );
    for (let waits = 0; segment.runId && waits < maxWaits; waits++) {
      // Waiting for a person: only the decisions can move the program on, so wait for them
      // (they are kept with the suspended run) before resuming it.
      if (segment.approval) await Promise.allSettled([...approvals]);
      segment = await follow(sandbox.wait({ scope, waitCallId: newId("wait", 8), codeModeRunId: segment.runId }));
    }
    return 0;
  } finally {
    sandbox.close();
  }
}
