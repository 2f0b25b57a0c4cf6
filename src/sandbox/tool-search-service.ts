/**
 * Tool Search on the sidecar (the seed's openclaw-tool-search.md), a run's two surfaces
 * instead of code mode:
 * - `tool_search_code` (mode code): the gateway runs the model's program with
 *   `Sandbox.Exec`; it gets the reduced guest API (./surfaces/tool-search/prelude.ts), every
 *   catalog entry (MCP included) is searchable and callable by id, and it never suspends:
 *   a call still pending at `codeTimeoutMs` fails it with `timeout`. When the pool cannot
 *   start a runtime, the result is `failed` with `runtime_unavailable`, recorded first, so
 *   the orchestrator has already switched the run to mode tools (the seed's fallback).
 * - `tool_search` / `tool_describe` / `tool_call` (mode tools): answered without a VM, from
 *   the run's catalog index; `ToolCall` streams one ToolCallRequested, answered with
 *   BridgeCallback, then one Result. These record before they answer, so the gateway reads
 *   a trajectory and counters that already include them; they never find a program-only tool.
 * Every answer is policy-filtered, counted in the run's telemetry and recorded in its trajectory.
 */
import { randomText } from "../shared/ids.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ErrorCode, ResultStatus, ToolSource, type ResultSchema, type RunScope, type TelemetrySchema } from "../gen/codemode/common/v1/common_pb.js";
import type { ExecRequest, Sandbox, ToolEntrySchema } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { CallContext, ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { parseCodeModeConfig, type CodeModeConfig } from "../shared/config.js";
import { oneLine } from "./catalog/search/tool-search-index.js";
import type { Logger } from "../shared/logger.js";
import { checkIdLength } from "../shared/request-limits.js";
import { NO_OPEN_RUN, requireScope, scopeKeyOf, type Scope } from "../shared/scope.js";
import type { CallRegistry, LiveCall } from "./exec/call-registry.js";
import { sourceBreakdown, type CompactEntry } from "./catalog/run-catalog.js";
import { checkExecInput } from "./program/exec-input.js";
import type { ResolvedRun, RunResolver } from "./link/run-resolver.js";
import { Segment, unreachable, type Answer, type SegmentInit } from "./exec/segment.js";
import { limitsOf } from "./suspend/suspension.js";
import { parseBridgeJson } from "./worker/json-bridge.js";

const SOURCE_ENUM = { openclaw: ToolSource.OPENCLAW, mcp: ToolSource.MCP, client: ToolSource.CLIENT } as const;
const STRUCTURED_TOOLS = ["tool_search", "tool_describe", "tool_call"] as const;
/** Longest search query (characters) the index ranks; longer queries are cut. */
const MAX_QUERY_CHARS = 256;
const NO_CATALOG = { ok: false as const, name: "ToolNotFound", message: "this run has no tool catalog." };

/** The surfaces whose runs the structured RPCs serve (mode code may fall back to them at any time). */
const TOOL_SEARCH_SURFACES = new Set(["tool_search", "tool_search_code"]);

/**
 * Runs a `tool_search_code` program (an Exec on a run whose surface is Tool Search, mode
 * code). `base` is what every segment of the sidecar shares; `config` the run's code-mode
 * config with the Exec's overrides, whose timeout and search limits Tool Search replaces.
 */
export async function execToolSearchCode(
  base: Omit<SegmentInit, "config" | "kind">,
  config: CodeModeConfig,
  req: ExecRequest,
  cancelSignals: readonly AbortSignal[],
): Promise<void> {
  const run = base.run!;
  const ts = run.toolSearch;
  const effective = parseCodeModeConfig(config, { timeoutMs: ts.codeTimeoutMs, searchDefaultLimit: ts.searchDefaultLimit, maxSearchLimit: ts.maxSearchLimit });
  const seg = new Segment({ ...base, kind: "tool_search_code", config: effective });
  // The seed's bridge runs JavaScript; a TypeScript program is refused like a disabled language.
  const input = checkExecInput({ code: req.code, command: req.command, language: req.language }, ["javascript"]);
  if (!input.ok) return seg.finish({ status: "failed", error: input.error.replace(/^exec\b/, "tool_search_code"), code: "invalid_input" }, 0);
  const outcome = await seg.run(
    {
      kind: "exec",
      source: input.code,
      language: input.language,
      limits: limitsOf(effective),
      catalog: { staticJson: "{}", allToolsJson: "[]", convenienceJson: "[]", needsContext: false },
      contextJson: "null",
      outputBytesUsed: 0,
      surface: "tool_search",
    },
    cancelSignals,
  );
  if (outcome.status === "completed") return seg.finish({ status: "completed", valueJson: outcome.valueJson }, outcome.outputBytes);
  if (outcome.status === "suspended") {
    // The worker snapshots a VM whose deadline passed with calls pending; this surface never suspends.
    const pending = outcome.pending.filter((p) => p.kind === "call").length;
    const cancelled = cancelSignals.some((s) => s.aborted);
    const error = cancelled
      ? "tool_search_code was cancelled by the gateway."
      : `tool_search_code timed out after ${effective.timeoutMs} ms with ${pending} tool call${pending === 1 ? "" : "s"} still pending.`;
    return seg.finish({ status: "failed", error, code: cancelled ? "internal_error" : "timeout" }, outcome.outputBytes);
  }
  if (outcome.code === "runtime_unavailable") {
    const error = `tool_search_code could not start an isolated runtime (${outcome.error}); this run falls back to tool_search, tool_describe and tool_call (DescribeSurface).`;
    return seg.finishRecorded({ status: "failed", error, code: "runtime_unavailable" }, outcome.outputBytes);
  }
  // The worker's refusals speak of code mode's exec; name this surface's API instead.
  const error =
    outcome.code === "invalid_input"
      ? outcome.error
          .replace(/^exec\b/, "tool_search_code")
          .replace(" in code mode ", " in tool_search_code ")
          .replace("Use tools.search/tools.call instead.", "Use openclaw.tools.search/openclaw.tools.call instead.")
      : outcome.error;
  return seg.finish({ status: "failed", error, code: outcome.code }, outcome.outputBytes);
}

export type ToolSearchDeps = {
  resolver: RunResolver;
  calls: CallRegistry;
  log: Logger;
  /** Counts the call as in flight; its signal aborts when the drain budget runs out. */
  tracked(body: (drainSignal: AbortSignal) => Promise<void>): Promise<void>;
  /** The request's scope as the caller's tenant's (../shared/scope.ts `requireScope` when absent: the default tenant). */
  scopeOf?: (s: RunScope | undefined, ctx: CallContext | undefined) => Scope;
};

function wireEntry(e: CompactEntry): MessageInitShape<typeof ToolEntrySchema> {
  return {
    id: e.id,
    name: e.name,
    label: e.label ?? "",
    description: e.description,
    source: SOURCE_ENUM[e.source as keyof typeof SOURCE_ENUM] ?? ToolSource.OPENCLAW,
    sourceName: e.sourceName ?? "",
  };
}

type Deltas = { search: number; describe: number; call: number };

export function toolSearchHandlers(deps: ToolSearchDeps): Pick<ServiceHandlers<typeof Sandbox.method>, "toolSearch" | "toolDescribe" | "toolCall"> {
  const { resolver, calls, log } = deps;
  const scopeOf = deps.scopeOf ?? ((s: RunScope | undefined) => requireScope(s));

  /** The open run, which must have a Tool Search surface; contract violations are gRPC errors. */
  const resolveRun = async (scope: Scope): Promise<ResolvedRun> => {
    let run: ResolvedRun;
    try {
      run = await resolver.resolve(scope);
    } catch (err) {
      log.warn({ err }, "could not resolve run with the orchestrator");
      throw new ServiceError("unavailable", unreachable(err));
    }
    if (!run.found) throw new ServiceError("failed_precondition", NO_OPEN_RUN);
    if (!TOOL_SEARCH_SURFACES.has(run.surface)) {
      throw new ServiceError(
        "failed_precondition",
        `Tool Search is not this run's surface (it is ${run.surface.replace("_", " ")}); open the run with tool_search.enabled`,
      );
    }
    return run;
  };

  const telemetry = (run: ResolvedRun, d: Deltas, durationMs: number): MessageInitShape<typeof TelemetrySchema> => {
    const entries = run.catalog?.entries ?? [];
    const s = sourceBreakdown(entries);
    return {
      catalogSize: entries.length,
      sources: { openclaw: s.core, mcp: s.mcp, client: s.client },
      searchCount: run.counters.search + d.search,
      describeCount: run.counters.describe + d.describe,
      callCount: run.counters.call + d.call,
      modelVisibleTools: [...STRUCTURED_TOOLS],
      durationMs,
    };
  };

  /** Records the model's call as a trajectory step with its counter deltas (never fails the call). */
  const record = (
    scope: Scope,
    step: {
      kind: string;
      callId: string;
      status: string;
      errorCode?: string;
      errorMessage?: string;
      startedAtMs: number;
      durationMs: number;
      nested?: LiveCall;
      nestedSource?: { source: ToolSource; sourceName: string };
    },
    d: Deltas,
  ): Promise<void> => {
    const c = step.nested;
    const nestedCalls = c
      ? [
          {
            callId: c.callId,
            toolId: c.toolId,
            toolName: c.toolName,
            outcome: c.outcome ? (c.outcome.ok ? "ok" : "error") : "abandoned",
            errorMessage: c.outcome?.errorMessage ?? "",
            startedAtMs: BigInt(c.startedAtMs),
            durationMs: c.outcome?.durationMs ?? 0,
            parentCallId: c.parentCallId,
            ...step.nestedSource,
          },
        ]
      : [];
    return resolver
      .record(scope, {
        step: {
          kind: step.kind,
          callId: step.callId,
          codeModeRunId: "",
          status: step.status,
          errorCode: step.errorCode ?? "",
          errorMessage: step.errorMessage ?? "",
          startedAtMs: BigInt(step.startedAtMs),
          durationMs: step.durationMs,
          nestedCalls,
        },
        searchDelta: d.search,
        describeDelta: d.describe,
        callDelta: d.call,
      })
      .catch((err: unknown) => log.warn({ err, kind: step.kind }, "could not record the Tool Search step"));
  };

  return {
    async toolSearch(req, ctx) {
      const scope = scopeOf(req.scope, ctx);
      checkIdLength("call_id", req.callId);
      const startedAtMs = Date.now();
      const t0 = performance.now();
      const run = await resolveRun(scope);
      const ts = run.toolSearch;
      const requested = req.limit ?? ts.searchDefaultLimit;
      const limit = Math.min(ts.maxSearchLimit, Math.max(1, requested));
      await run.catalog?.indexReady(); // being built off the main thread (./catalog/index-builder.ts)
      const entries = run.catalog ? run.catalog.search(req.query.slice(0, MAX_QUERY_CHARS), limit, "tool_search_tools") : [];
      const d = { search: 1, describe: 0, call: 0 };
      const durationMs = performance.now() - t0;
      await record(scope, { kind: "tool_search", callId: req.callId, status: "completed", startedAtMs, durationMs }, d);
      return { tools: entries.map(wireEntry), modelJson: JSON.stringify(entries), telemetry: telemetry(run, d, durationMs) };
    },

    async toolDescribe(req, ctx) {
      const scope = scopeOf(req.scope, ctx);
      checkIdLength("call_id", req.callId);
      const startedAtMs = Date.now();
      const t0 = performance.now();
      const run = await resolveRun(scope);
      const id = req.id.slice(0, 1_000);
      await run.catalog?.indexReadyFor(id); // an unknown id's "did you mean" reads the index, being built off the main thread
      const described = run.catalog ? run.catalog.describe(id, "tool_search_tools") : NO_CATALOG;
      const d = { search: 0, describe: 1, call: 0 };
      const durationMs = performance.now() - t0;
      if (!described.ok) {
        await record(scope, { kind: "tool_describe", callId: req.callId, status: "failed", errorMessage: described.message, startedAtMs, durationMs }, d);
        return {
          error: { name: described.name, message: described.message },
          modelJson: JSON.stringify({ error: `${described.name}: ${described.message}` }),
          telemetry: telemetry(run, d, durationMs),
        };
      }
      await record(scope, { kind: "tool_describe", callId: req.callId, status: "completed", startedAtMs, durationMs }, d);
      const v = described.value;
      return {
        tool: wireEntry({ ...v, description: oneLine(v.description) }),
        fullDescription: v.description,
        parametersJson: JSON.stringify(v.parameters),
        modelJson: JSON.stringify(v),
        telemetry: telemetry(run, d, durationMs),
      };
    },

    async toolCall(req, stream, ctx) {
      const scope = scopeOf(req.scope, ctx);
      checkIdLength("call_id", req.callId);
      const inputJson = req.inputJson.trim() === "" ? "{}" : req.inputJson;
      try {
        parseBridgeJson(inputJson, "input_json");
      } catch (err) {
        throw new ServiceError("invalid_argument", (err as Error).message);
      }
      const startedAtMs = Date.now();
      const t0 = performance.now();
      const run = await resolveRun(scope);
      const d = { search: 0, describe: 0, call: 1 };
      const finish = async (
        r: { ok: true; valueJson: string } | { ok: false; error: string; code?: ErrorCode },
        nested?: LiveCall,
        nestedSource?: { source: ToolSource; sourceName: string },
      ) => {
        const durationMs = performance.now() - t0;
        const result: MessageInitShape<typeof ResultSchema> = r.ok
          ? {
              status: ResultStatus.COMPLETED,
              valueJson: r.valueJson,
              modelJson: `{"status":"completed","value":${r.valueJson}}`,
              telemetry: telemetry(run, d, durationMs),
            }
          : {
              status: ResultStatus.FAILED,
              error: r.error,
              code: r.code ?? ErrorCode.UNSPECIFIED,
              modelJson: JSON.stringify({ status: "failed", error: r.error }),
              telemetry: telemetry(run, d, durationMs),
            };
        const status = r.ok ? "completed" : "failed";
        await record(
          scope,
          {
            kind: "tool_call",
            callId: req.callId,
            status,
            errorMessage: r.ok ? "" : r.error,
            startedAtMs,
            durationMs,
            ...(nested ? { nested } : {}),
            ...(nestedSource ? { nestedSource } : {}),
          },
          d,
        );
        stream.send({ event: { case: "result", value: result } });
      };
      const id = req.id.slice(0, 1_000);
      await run.catalog?.indexReadyFor(id); // an unknown id's "did you mean" reads the index, being built off the main thread
      const resolved = run.catalog ? run.catalog.resolve(id, "tool_search_tools") : NO_CATALOG;
      if (!resolved.ok) return finish({ ok: false, error: `${resolved.name}: ${resolved.message}` });
      const e = resolved.entry;
      await deps.tracked(async (drainSignal) => {
        const callId = `c_${randomText(9)}`;
        let settle!: (a: Answer | undefined) => void;
        const answered = new Promise<Answer | undefined>((resolve) => (settle = resolve));
        const call: LiveCall = {
          callId,
          scopeKey: scopeKeyOf(scope),
          toolId: e.id,
          toolName: e.name,
          parentCallId: req.callId,
          startedAtMs: Date.now(),
          deliver: (a) => settle(a),
        };
        const cancel = () => settle(undefined);
        // Both listened to, not AbortSignal.any of them: the drain's signal is shared (./exec/drain-signals.ts).
        stream.signal.addEventListener("abort", cancel, { once: true });
        drainSignal.addEventListener("abort", cancel, { once: true });
        calls.add(call);
        const source = { source: SOURCE_ENUM[e.source], sourceName: e.sourceName };
        try {
          stream.send({
            event: { case: "toolCall", value: { callId, toolId: e.id, toolName: e.name, ...source, inputJson, parentCallId: req.callId, codeModeRunId: "" } },
          });
          const answer = stream.signal.aborted || drainSignal.aborted ? undefined : await answered;
          if (!answer)
            return finish(
              {
                ok: false,
                error: drainSignal.aborted ? "tool_call was cancelled: this sidecar is shutting down." : "tool_call was cancelled by the gateway.",
                code: ErrorCode.INTERNAL_ERROR,
              },
              call,
              source,
            );
          if (answer.ok) return finish({ ok: true, valueJson: answer.json }, call, source);
          return finish({ ok: false, error: `${answer.error.name}: ${answer.error.message}` }, call, source);
        } finally {
          stream.signal.removeEventListener("abort", cancel);
          drainSignal.removeEventListener("abort", cancel);
          calls.endAll([call]);
        }
      });
    },
  };
}
