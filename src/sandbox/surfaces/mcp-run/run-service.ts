/**
 * `codemode.run` on the sidecar (the MCP_RUN surface): an Exec on a run opened with
 * `mcp_run.enabled`. It reads the request (`input_json`), reports adjusted limits and
 * unavailable capabilities at once, parses and links the script as an ES module
 * (./module-transform.ts), runs it on the pool in a fresh VM with the Code Mode for MCP
 * prelude (never suspended: a script that outlives `timeoutMs` is stopped), validates every
 * tool call's input before the gateway sees it, answers discovery from the catalog itself,
 * and ends with one Result whose `model_json` is the spec's response (also when the script
 * fails) and whose `value_json` is the response's `result`.
 *
 * The gateway stream carries one `ToolCallRequested` per tool call (answered with
 * BridgeCallback: an MCP CallToolResult as `result_json`, or an error), an `Output`
 * (`{level, message, timeMs}`) per console entry as it happens, and the Result; its
 * `status` says how the script ended, and its `model_json` is what the model gets.
 */
import type { ExecRequest } from "../../../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { CodeModeConfig } from "../../../shared/config.js";
import { SPEC_VERSION } from "../../../shared/mcp-run/naming.js";
import { MAX_BRIDGE_BYTES } from "../../worker/json-bridge.js";
import { Segment, type SegmentInit } from "../../exec/segment.js";
import { EMPTY_GUEST_CATALOG, type TaskLimits } from "../../pool/task-protocol.js";
import { transformModule } from "./module-transform.js";
import type { Diagnostic } from "./diagnostic.js";
import { buildResponse, failureDiagnostic, RunReport, type RunResponse } from "./response.js";
import { effectiveLimits, parseRunInput } from "./run-input.js";
import { McpRunView } from "./run-view.js";

/** Largest `result` (JSON bytes) a response carries: the response goes to the model and over gRPC twice. */
export const MAX_RESULT_BYTES = 1_048_576;

/** Capabilities that are always there: the built-in modules. */
const BUILT_IN = new Set(["@codemode/discovery", "@codemode/errors"]);

function capabilityNotes(view: McpRunView, capabilities: readonly string[]): Diagnostic[] {
  const notes: Diagnostic[] = [];
  for (const cap of new Set(capabilities)) {
    if (BUILT_IN.has(cap) || view.server(cap)) continue;
    const connected = view.servers.map((s) => s.serverId).join(", ") || "(none)";
    notes.push({
      severity: "warning",
      code: "CAPABILITY_UNAVAILABLE",
      message: `requested capability ${JSON.stringify(cap.slice(0, 200))} is not available: no connected MCP server has that id. Importing it fails with ServerNotFoundError.`,
      hint: `Use a connected server (${connected}), or tell the user the server is unavailable.`,
      path: "/requestedCapabilities",
    });
  }
  return notes;
}

export async function execMcpRun(
  base: Omit<SegmentInit, "config" | "kind">,
  config: CodeModeConfig,
  req: ExecRequest,
  cancelSignals: readonly AbortSignal[],
): Promise<void> {
  const run = base.run!;
  const view = McpRunView.of(run.catalog);
  const report = new RunReport();
  let response: RunResponse | undefined;
  const send: SegmentInit["send"] = (event) => {
    if (event.case === "output") {
      const item = event.value.kind;
      const entry = item?.case === "json" || item?.case === "text" ? report.add(item.case, item.value ?? "") : undefined;
      if (entry) base.send({ case: "output", value: { kind: { case: "json", value: JSON.stringify(entry) } } });
      return;
    }
    if (event.case === "result" && response) {
      // The same object is what the trajectory records, so the step keeps the spec's response too.
      event.value.modelJson = JSON.stringify(response);
      event.value.output = [];
    }
    base.send(event);
  };
  const seg = new Segment({ ...base, send, kind: "codemode.run", config, checkCall: view.checkCall, answerRequest: view.answer });
  const parsed = parseRunInput(req.inputJson, req.code);
  seg.recordInput(
    parsed.ok
      ? { code: parsed.input.code, limits: parsed.input.requested, requestedCapabilities: parsed.input.capabilities }
      : { inputJson: req.inputJson ?? "" },
  );
  const mcpRun = run.mcpRun;
  if (!parsed.ok) {
    response = buildResponse(report, [], { failure: parsed.diagnostic }, mcpRun.maxLogBytes);
    return seg.finish({ status: "failed", error: parsed.diagnostic.message, code: "invalid_input" }, 0);
  }
  const { limits, notes } = effectiveLimits(parsed.input.requested, config, mcpRun);
  const pre = [...notes, ...capabilityNotes(view, parsed.input.capabilities)];
  const linked = transformModule(parsed.input.code, view.lookup);
  if (!linked.ok) {
    response = buildResponse(report, pre, { failure: linked.diagnostic }, limits.maxLogBytes);
    return seg.finish({ status: "failed", error: linked.diagnostic.message, code: "invalid_input" }, 0);
  }
  const taskLimits: TaskLimits = {
    timeoutMs: limits.timeoutMs,
    memoryLimitBytes: limits.maxMemoryBytes,
    // What the prelude may report: logs (counted by the guest), one trace per call, a few markers, the result.
    maxOutputBytes: limits.maxLogBytes + limits.maxToolCalls * 512 + 65_536 + MAX_RESULT_BYTES,
    maxPendingToolCalls: config.maxPendingToolCalls,
    maxSnapshotBytes: config.maxSnapshotBytes,
  };
  const context = { specVersion: SPEC_VERSION, maxLogBytes: limits.maxLogBytes, maxToolCalls: limits.maxToolCalls, maxConcurrent: config.maxPendingToolCalls };
  const outcome = await seg.run(
    {
      kind: "exec",
      source: linked.body,
      language: "javascript",
      limits: taskLimits,
      catalog: { ...EMPTY_GUEST_CATALOG, staticJson: view.staticJson },
      contextJson: JSON.stringify(context),
      outputBytesUsed: 0,
      surface: "mcp_run",
    },
    cancelSignals,
  );
  const bounds = { timeoutMs: limits.timeoutMs, maxMemoryBytes: limits.maxMemoryBytes };
  if (outcome.status === "completed") {
    const bytes = Buffer.byteLength(outcome.valueJson, "utf8");
    if (bytes <= Math.min(MAX_RESULT_BYTES, MAX_BRIDGE_BYTES)) {
      response = buildResponse(report, pre, { result: JSON.parse(outcome.valueJson) as unknown }, limits.maxLogBytes);
      return seg.finish({ status: "completed", valueJson: outcome.valueJson }, outcome.outputBytes);
    }
    const failure: Diagnostic = {
      severity: "error",
      code: "SANDBOX_LIMIT",
      errorClass: "SandboxLimitError",
      message: `__codemode_result__ is ${bytes} bytes of JSON, over the ${MAX_RESULT_BYTES}-byte limit of a response.`,
      hint: "Return a smaller summary in __codemode_result__.",
    };
    response = buildResponse(report, pre, { failure }, limits.maxLogBytes);
    return seg.finish({ status: "failed", error: failure.message, code: "output_limit_exceeded" }, outcome.outputBytes);
  }
  const failure = failureDiagnostic(outcome, report, bounds);
  response = buildResponse(report, pre, { failure }, limits.maxLogBytes);
  if (outcome.status === "suspended")
    return seg.finish(
      { status: "failed", error: failure.message, code: cancelSignals.some((s) => s.aborted) ? "internal_error" : "timeout" },
      outcome.outputBytes,
    );
  return seg.finish({ status: "failed", error: outcome.error, code: outcome.code }, outcome.outputBytes);
}
