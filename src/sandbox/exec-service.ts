/**
 * The Sandbox service: Exec runs a cell on the pool and streams what happens (nested
 * tool calls, output, then exactly one Result); BridgeCallback takes a gateway's answer
 * to a nested call and delivers it into the live VM. Guest failures are results; only
 * contract violations (missing scope, unknown call, malformed JSON) are gRPC errors.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ToolSource, type RunScope } from "../gen/codemode/common/v1/common_pb.js";
import type { Sandbox, ExecEventSchema } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { ConfigError, parseCodeModeConfig, type CodeModeConfig } from "../shared/config.js";
import { configLayerFromWire } from "../shared/config-wire.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { CallRegistry, type LiveCall } from "./call-registry.js";
import { sourceBreakdown } from "./catalog/run-catalog.js";
import { checkExecInput } from "./guest/exec-input.js";
import type { SandboxPool } from "./pool.js";
import { buildResult, type OutputItem, type ResultInput } from "./result.js";
import type { RunResolver } from "./run-resolver.js";
import type { TaskOutcome } from "./task-protocol.js";
import { parseBridgeJson } from "./worker/json-bridge.js";

const MODEL_VISIBLE = ["exec", "wait"] as const;
/** Longest search query (characters) the catalog ranks; longer queries are cut. */
const MAX_QUERY_CHARS = 256;

type RequestPayload = { query: string; limit: number | null; id: string; path: string };

/** A guest request payload, read defensively: guest code can make it any JSON value. */
function requestPayload(json: string): RequestPayload {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    raw = null;
  }
  const o = raw !== null && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  return { query: str(o.query), limit: typeof o.limit === "number" ? o.limit : null, id: str(o.id), path: str(o.path) };
}
const SOURCE_ENUM = { openclaw: ToolSource.OPENCLAW, mcp: ToolSource.MCP, client: ToolSource.CLIENT } as const;

type Scope = { agentId: string; sessionId: string; sessionKey: string; runId: string };

function requireScope(s: RunScope | undefined): Scope {
  if (!s || !s.runId.trim()) throw new ServiceError("invalid_argument", "scope.run_id is required");
  return { agentId: s.agentId, sessionId: s.sessionId, sessionKey: s.sessionKey, runId: s.runId };
}

export function scopeKeyOf(s: Scope): string {
  return JSON.stringify([s.agentId, s.sessionId, s.sessionKey, s.runId]);
}

export type ExecServiceDeps = { pool: SandboxPool; resolver: RunResolver; calls: CallRegistry; log: Logger };

export function sandboxHandlers(deps: ExecServiceDeps): Partial<ServiceHandlers<typeof Sandbox.method>> {
  const { pool, resolver, calls, log } = deps;

  return {
    async exec(req, stream) {
      const scope = requireScope(req.scope);
      const key = scopeKeyOf(scope);
      const startedAt = Date.now();
      const t0 = performance.now();
      const execCallId = req.execCallId || newId("exec", 8);
      const codeModeRunId = newId("cm");
      const rlog = log.child({ runId: scope.runId, codeModeRunId, execCallId });
      const send = (event: NonNullable<MessageInitShape<typeof ExecEventSchema>["event"]>) => stream.send({ event } as MessageInitShape<typeof ExecEventSchema>);

      let run;
      try {
        run = await resolver.resolve(scope);
      } catch (err) {
        rlog.warn({ err }, "could not resolve run with the orchestrator");
        run = undefined;
      }
      let config: CodeModeConfig;
      try {
        config = parseCodeModeConfig(run?.configLayer, configLayerFromWire(req.config));
      } catch (err) {
        if (err instanceof ConfigError) throw new ServiceError("invalid_argument", `config: ${err.message}`);
        throw err;
      }
      const catalog = run?.catalog;
      const outputs: OutputItem[] = [];
      const myCalls = new Set<LiveCall>();
      const counters = { search: 0, describe: 0, call: 0 };
      const base = run?.counters ?? { search: 0, describe: 0, call: 0 };

      const finish = (r: ResultInput, outputBytes: number) => {
        const entries = catalog?.entries ?? [];
        const result = buildResult(r, outputs, {
          catalogSize: entries.length,
          sources: sourceBreakdown(entries),
          coreSourceName: config.coreSourceName,
          searchCount: base.search + counters.search,
          describeCount: base.describe + counters.describe,
          callCount: base.call + counters.call,
          modelVisibleTools: MODEL_VISIBLE,
          durationMs: performance.now() - t0,
          outputBytes,
        });
        send({ case: "result", value: result });
        const nested = [...myCalls].map((c) => ({
          callId: c.callId,
          toolId: c.toolId,
          toolName: c.toolName,
          outcome: c.outcome ? (c.outcome.ok ? "ok" : "error") : "abandoned",
          errorMessage: c.outcome?.errorMessage ?? "",
          startedAtMs: BigInt(c.startedAtMs),
          durationMs: c.outcome?.durationMs ?? 0,
          parentCallId: c.parentCallId,
        }));
        rlog.info({ status: r.status, code: r.status === "failed" ? r.code : undefined, ms: Math.round(performance.now() - t0), calls: nested.length }, "exec finished");
        if (run?.found) {
          resolver
            .record(scope, {
              step: {
                kind: "exec",
                callId: execCallId,
                codeModeRunId,
                status: r.status,
                errorCode: r.status === "failed" ? (r.code ?? "") : "",
                startedAtMs: BigInt(startedAt),
                durationMs: performance.now() - t0,
                nestedCalls: nested,
              },
              searchDelta: counters.search,
              describeDelta: counters.describe,
              callDelta: counters.call,
            })
            .catch((err: unknown) => rlog.warn({ err }, "could not record the exec's trajectory"));
        }
      };

      if (run === undefined) {
        return finish({ status: "failed", error: "code mode runtime is unavailable: the orchestrator cannot be reached.", code: "runtime_unavailable" }, 0);
      }
      if (run.found && !run.active) {
        return finish({ status: "failed", error: `code mode is not active for this run: ${run.inactiveReason}.`, code: "invalid_input" }, 0);
      }
      if (!config.enabled) {
        return finish({ status: "failed", error: "code mode is disabled for this run.", code: "invalid_input" }, 0);
      }
      const input = checkExecInput({ code: req.code, command: req.command, language: req.language }, config.languages);
      if (!input.ok) return finish({ status: "failed", error: input.error, code: "invalid_input" }, 0);

      const guest = catalog?.guest ?? { allToolsJson: "[]", convenience: [], callableIds: [] };
      const handle = pool.exec(
        {
          source: input.code,
          language: input.language,
          limits: {
            timeoutMs: config.timeoutMs,
            memoryLimitBytes: config.memoryLimitBytes,
            maxOutputBytes: config.maxOutputBytes,
            maxPendingToolCalls: config.maxPendingToolCalls,
            maxSnapshotBytes: config.maxSnapshotBytes,
          },
          catalog: guest,
          outputBytesUsed: 0,
        },
        {
          onOutput(kind, data) {
            outputs.push({ kind, data });
            send({ case: "output", value: { kind: { case: kind, value: data } } });
          },
          onToolCall(callId, toolId, inputJson) {
            counters.call++;
            const resolved = catalog ? catalog.resolve(toolId) : { ok: false as const, name: "ToolNotFound", message: `unknown tool id ${JSON.stringify(toolId)}. This run has no tool catalog.` };
            if (!resolved.ok) {
              handle.answer(callId, { ok: false, error: { name: resolved.name, message: resolved.message } });
              return;
            }
            const e = resolved.entry;
            const call: LiveCall = {
              callId,
              scopeKey: key,
              toolId: e.id,
              toolName: e.name,
              parentCallId: execCallId,
              startedAtMs: Date.now(),
              deliver: (answer) => handle.answer(callId, answer),
            };
            myCalls.add(call);
            calls.add(call);
            send({
              case: "toolCall",
              value: { callId, toolId: e.id, toolName: e.name, source: SOURCE_ENUM[e.source], sourceName: e.sourceName, inputJson, parentCallId: execCallId, codeModeRunId },
            });
          },
          onRequest(reqId, op, payloadJson) {
            const payload = requestPayload(payloadJson);
            if (op === "search") {
              counters.search++;
              const requested = typeof payload.limit === "number" && Number.isFinite(payload.limit) ? Math.trunc(payload.limit) : config.searchDefaultLimit;
              const limit = Math.min(config.maxSearchLimit, Math.max(1, requested));
              handle.answer(reqId, { ok: true, json: JSON.stringify(catalog ? catalog.search(payload.query.slice(0, MAX_QUERY_CHARS), limit) : []) });
            } else if (op === "describe") {
              counters.describe++;
              const d = catalog ? catalog.describe(payload.id) : { ok: false as const, name: "ToolNotFound", message: "this run has no tool catalog." };
              handle.answer(reqId, d.ok ? { ok: true, json: JSON.stringify(d.value) } : { ok: false, error: { name: d.name, message: d.message } });
            } else if (op === "api_list") {
              handle.answer(reqId, { ok: true, json: "[]" });
            } else {
              handle.answer(reqId, { ok: false, error: { name: "NotFound", message: `no API file at ${JSON.stringify(payload.path.slice(0, MAX_QUERY_CHARS))}` } });
            }
          },
          onYield(callId) {
            handle.answer(callId, { ok: true, json: "" });
          },
        },
      );
      const onAbort = () => handle.cancel("the gateway cancelled the exec");
      stream.signal.addEventListener("abort", onAbort, { once: true });
      let outcome: TaskOutcome;
      try {
        outcome = await handle.outcome;
      } finally {
        stream.signal.removeEventListener("abort", onAbort);
        calls.endAll(myCalls);
      }
      if (outcome.status === "completed") finish({ status: "completed", valueJson: outcome.valueJson }, outcome.outputBytes);
      else finish({ status: "failed", error: outcome.error, code: outcome.code }, outcome.outputBytes);
    },

    async bridgeCallback(req) {
      const scope = requireScope(req.scope);
      if (!req.callId) throw new ServiceError("invalid_argument", "call_id is required");
      let answer: { ok: true; json: string } | { ok: false; error: { name: string; message: string } };
      if (req.outcome.case === "resultJson") {
        try {
          parseBridgeJson(req.outcome.value, "result_json");
        } catch (err) {
          throw new ServiceError("invalid_argument", (err as Error).message);
        }
        answer = { ok: true, json: req.outcome.value };
      } else if (req.outcome.case === "error") {
        const e = req.outcome.value;
        answer = { ok: false, error: { name: e.name || "Error", message: e.message } };
      } else {
        throw new ServiceError("invalid_argument", "set result_json or error");
      }
      calls.answer(req.callId, scopeKeyOf(scope), answer);
      return { deliveredLive: true };
    },
  };
}
