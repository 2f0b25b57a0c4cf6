/**
 * Metrics and traces for the Sandbox service, added around its handlers, never inside the
 * exec path: each Exec/Wait stream is watched as it is sent (nested ToolCallRequested
 * events, then one Result), and BridgeCallback answers close the nested calls they settle.
 * Loaded only when metrics or tracing are on (./server.ts); else handlers are untouched.
 *
 * Spans: `codemode.exec` / `codemode.wait` (kind SERVER), children of the gateway's span
 * named by the call's `traceparent`/`tracestate` metadata; under it one `codemode.tool_call`
 * (kind CLIENT) per nested call, from its ToolCallRequested to the gateway's answer reaching
 * this sidecar (or to the segment's end: outcome `pending` when the run suspended first,
 * `abandoned` otherwise). Attributes carry ids (run, call, tool), never tool inputs, outputs
 * or program text. A server stream has no per-message metadata, so each nested call's trace
 * context travels in the event (ToolCallRequested.trace_parent / trace_state, empty when
 * tracing is off), and the gateway parents its tool-execution span on trace_parent.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
} from "@opentelemetry/api";
import type { Metadata } from "@grpc/grpc-js";
import { ErrorCode, ResultStatus, ToolSource, WaitReason } from "../gen/codemode/common/v1/common_pb.js";
import type { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { tracingEnabled } from "../shared/tracing.js";
import type { SandboxMetrics, SegmentKind } from "./metrics.js";
import { errorCodeName } from "./exec/result.js";
import type { ExecEventInit } from "./exec/segment.js";

type Handlers = Partial<ServiceHandlers<typeof Sandbox.method>>;
type Scope = { agentId?: string; agentRunId?: string } | undefined;
type Outcome = "ok" | "error" | "pending" | "abandoned";

const SOURCES: Record<number, string> = { [ToolSource.OPENCLAW]: "openclaw", [ToolSource.MCP]: "mcp", [ToolSource.CLIENT]: "client" };
const STATUSES: Record<number, string> = { [ResultStatus.COMPLETED]: "completed", [ResultStatus.WAITING]: "waiting", [ResultStatus.FAILED]: "failed" };
const RPC_METHOD: Record<SegmentKind, string> = { exec: "Exec", wait: "Wait" };
const TRACER = "codemode-sandbox";

const metadataGetter: TextMapGetter<Metadata> = {
  get: (md, key) => {
    const values = md.get(key).map((v) => (typeof v === "string" ? v : v.toString("utf8")));
    return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
  },
  keys: (md) => Object.keys(md.getMap()),
};

/** The caller's trace context from gRPC metadata (`traceparent`, `tracestate`); the root context when absent. */
function contextFromMetadata(md: Metadata | undefined): Context {
  return md ? propagation.extract(ROOT_CONTEXT, md, metadataGetter) : ROOT_CONTEXT;
}

/** The W3C headers (`traceparent`, and `tracestate` when there is one) naming `span` as the parent. */
function traceHeadersOf(span: Span): { traceparent?: string; tracestate?: string } {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), carrier);
  return carrier;
}

const codemodeTracer = (name: string) => trace.getTracer(name);

type NestedCall = { callId: string; source: string; t0: number; span: Span | undefined; segment: SegmentWatch };

/** What one Exec or Wait call sends, watched from its first event to its Result. */
class SegmentWatch {
  readonly calls = new Map<string, NestedCall>();
  private readonly t0 = performance.now();
  private readonly span: Span | undefined;
  private result: { status: string; code: string; seconds: number; snapshotBytes: number } | undefined;
  private ended = false;
  private made = 0;

  constructor(
    readonly kind: SegmentKind,
    private readonly shared: Shared,
    metadata: Metadata | undefined,
    attributes: Attributes,
    /** The caller's tenant, when the sidecar has a tenants file (per-tenant metrics). */
    private readonly tenant?: string,
  ) {
    shared.metrics?.segmentStarted(kind);
    if (tracingEnabled()) {
      const parent = contextFromMetadata(metadata);
      this.span = codemodeTracer(TRACER).startSpan(
        `codemode.${kind}`,
        {
          kind: SpanKind.SERVER,
          attributes: { "rpc.system": "grpc", "rpc.service": "codemode.sandbox.v1.Sandbox", "rpc.method": RPC_METHOD[kind], ...attributes },
        },
        parent,
      );
    }
  }

  /** Watches one event on its way out; returns the event to send (a nested call gains its trace context). */
  sent(event: ExecEventInit | undefined): ExecEventInit | undefined {
    if (event?.case === "toolCall") return this.toolCall(event);
    if (event?.case === "result") this.resultSent(event.value);
    return event;
  }

  private toolCall(event: Extract<ExecEventInit, { case: "toolCall" }>): ExecEventInit {
    const v = event.value;
    const callId = v.callId ?? "";
    const source = SOURCES[v.source ?? 0] ?? "unspecified";
    if (v.codeModeRunId) this.span?.setAttribute("codemode.code_mode_run_id", v.codeModeRunId);
    let span: Span | undefined;
    let out: ExecEventInit = event;
    if (this.span) {
      span = codemodeTracer(TRACER).startSpan(
        "codemode.tool_call",
        {
          kind: SpanKind.CLIENT,
          attributes: {
            "codemode.call_id": callId,
            "codemode.tool_id": v.toolId ?? "",
            "codemode.tool_name": v.toolName ?? "",
            "codemode.tool_source": source,
            "codemode.source_name": v.sourceName ?? "",
            "codemode.parent_call_id": v.parentCallId ?? "",
            "codemode.code_mode_run_id": v.codeModeRunId ?? "",
          },
        },
        trace.setSpan(ROOT_CONTEXT, this.span),
      );
      const headers = traceHeadersOf(span);
      // ToolCallRequested.trace_parent / trace_state: the nested span, handed back to the gateway.
      if (headers.traceparent)
        out = { case: "toolCall", value: Object.assign({}, v, { traceParent: headers.traceparent, traceState: headers.tracestate ?? "" }) };
    }
    this.made++;
    const call: NestedCall = { callId, source, t0: performance.now(), span, segment: this };
    this.calls.set(callId, call);
    this.shared.live.set(callId, call);
    return out;
  }

  private resultSent(r: Extract<ExecEventInit, { case: "result" }>["value"]): void {
    const status = STATUSES[r.status ?? 0] ?? "unspecified";
    const code =
      status === "failed"
        ? (errorCodeName(r.code ?? ErrorCode.UNSPECIFIED) ?? "uncaught")
        : status === "waiting"
          ? r.reason === WaitReason.YIELD
            ? "yield"
            : r.reason === WaitReason.APPROVAL
              ? "approval"
              : "pending_tools"
          : "ok";
    for (const a of r.telemetry?.approvals ?? []) this.shared.metrics?.approval(a.decision ?? "pending");
    const snapshotBytes = Number(r.telemetry?.snapshotBytes ?? 0);
    this.result = { status, code, seconds: (performance.now() - this.t0) / 1000, snapshotBytes };
    if (r.codeModeRunId) this.span?.setAttribute("codemode.code_mode_run_id", r.codeModeRunId);
    this.span?.setAttributes({
      "codemode.status": status,
      "codemode.nested_calls": this.made,
      ...(status === "failed" ? { "codemode.error_code": code } : {}),
      ...(status === "waiting" ? { "codemode.wait_reason": code, "codemode.snapshot_bytes": snapshotBytes } : {}),
    });
    if (status === "failed") this.span?.setStatus({ code: SpanStatusCode.ERROR, message: `failed: ${code}` });
    // Calls still open now: the run suspended with them pending, or the segment ended without them.
    for (const call of [...this.calls.values()]) this.shared.settle(call, status === "waiting" ? "pending" : "abandoned");
  }

  /** The handler returned or threw: ends the span and the in-flight count, once. */
  end(err?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    for (const call of [...this.calls.values()]) this.shared.settle(call, "abandoned");
    this.shared.metrics?.segmentEnded(this.kind, this.result);
    if (this.tenant !== undefined)
      this.shared.metrics?.tenantSegmentEnded(this.tenant, this.kind, this.result?.status ?? (err === undefined ? "none" : "refused"));
    if (err !== undefined) {
      const code = err instanceof ServiceError ? err.code : "internal";
      this.shared.metrics?.rpcError(RPC_METHOD[this.kind], code);
      this.span?.setAttribute("codemode.grpc_error", code);
      this.span?.setStatus({ code: SpanStatusCode.ERROR, message: code });
    }
    this.span?.end();
  }
}

/** State across the calls of one sidecar: nested calls that an answer may still settle. */
class Shared {
  readonly live = new Map<string, NestedCall>();
  constructor(readonly metrics: SandboxMetrics | undefined) {}

  settle(call: NestedCall, outcome: Outcome): void {
    if (this.live.get(call.callId) === call) this.live.delete(call.callId);
    if (!call.segment.calls.delete(call.callId)) return;
    this.metrics?.nestedCallEnded(call.source, outcome, (performance.now() - call.t0) / 1000);
    if (call.span) {
      call.span.setAttribute("codemode.call_outcome", outcome);
      if (outcome === "error") call.span.setStatus({ code: SpanStatusCode.ERROR, message: "the gateway answered with an error" });
      call.span.end();
    }
  }
}

const scopeAttributes = (scope: Scope): Attributes => ({ "codemode.agent_id": scope?.agentId ?? "", "codemode.agent_run_id": scope?.agentRunId ?? "" });

/**
 * Wraps the Sandbox handlers with metrics (when `metrics` is given) and spans (when
 * tracing is on); returns them unchanged when neither is.
 */
export function instrumentSandbox(handlers: Handlers, metrics: SandboxMetrics | undefined): Handlers {
  if (!metrics && !tracingEnabled()) return handlers;
  const shared = new Shared(metrics);
  const { exec, wait, bridgeCallback } = handlers;
  const out: Handlers = { ...handlers };

  const watched = <R>(
    kind: SegmentKind,
    attrs: Attributes,
    ctx: { metadata: Metadata; tenant?: string | undefined } | undefined,
    stream: { send(m: { event?: ExecEventInit }): boolean; signal: AbortSignal },
    run: (s: typeof stream) => Promise<R>,
  ) => {
    const seg = new SegmentWatch(kind, shared, ctx?.metadata, attrs, ctx?.tenant);
    const send = (m: { event?: ExecEventInit }) => {
      const event = seg.sent(m.event);
      return stream.send(event === m.event ? m : { ...m, ...(event ? { event } : {}) });
    };
    return run({ send, signal: stream.signal }).then(
      (r) => {
        seg.end();
        return r;
      },
      (err: unknown) => {
        seg.end(err);
        throw err;
      },
    );
  };

  if (exec) {
    out.exec = (req, stream, ctx) =>
      watched("exec", { ...scopeAttributes(req.scope), "codemode.exec_call_id": req.execCallId }, ctx, stream, (s) => exec(req, s, ctx));
  }
  if (wait) {
    out.wait = (req, stream, ctx) =>
      watched(
        "wait",
        { ...scopeAttributes(req.scope), "codemode.wait_call_id": req.waitCallId, "codemode.code_mode_run_id": req.codeModeRunId },
        ctx,
        stream,
        (s) => wait(req, s, ctx),
      );
  }
  if (bridgeCallback) {
    out.bridgeCallback = async (req, ctx) => {
      try {
        const res = await bridgeCallback(req, ctx);
        metrics?.answer(res.deliveredLive ? "live" : "routed");
        const call = shared.live.get(req.callId);
        if (call) shared.settle(call, req.outcome.case === "error" ? "error" : "ok");
        return res;
      } catch (err) {
        metrics?.answer("refused");
        metrics?.rpcError("BridgeCallback", err instanceof ServiceError ? err.code : "internal");
        throw err;
      }
    };
  }
  return out;
}
