// OpenTelemetry traces through real processes: `codemode start` configured only by the
// standard OTEL_* variables exports spans over OTLP/HTTP (JSON) to a tiny receiver in this
// test. The gateway sends W3C trace context as gRPC metadata on Exec and Wait; the exec
// and wait spans are its children, each nested tool call is a child of its exec, the
// attributes carry ids and never tool inputs, and tracing stays off unless configured.
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ExecRequestSchema, Sandbox, WaitRequestSchema, type ExecEvent } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { serviceDefinition } from "../../src/protocol/grpc-service.js";
import { tracingConfig } from "../../src/shared/tracing.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, spawnCodemode, type Proc } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: OtlpValue }>;
  status?: { code?: number; message?: string };
};
type Span = OtlpSpan & { attrs: Record<string, string | number | boolean>; service: string };

/** An OTLP/HTTP JSON receiver: collects every span POSTed to /v1/traces. */
async function startReceiver(): Promise<{ url: string; spans: Span[]; posts: number; close(): Promise<void> }> {
  const state = { spans: [] as Span[], posts: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") return void res.writeHead(404).end();
      state.posts++;
      expect(req.headers["content-type"]).toContain("application/json");
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: OtlpValue }> }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
      };
      for (const rs of body.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue ?? "";
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            state.spans.push({
              ...s,
              traceId: hex(s.traceId),
              spanId: hex(s.spanId),
              parentSpanId: s.parentSpanId ? hex(s.parentSpanId) : "",
              attrs: attrsOf(s),
              service,
            });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get spans() {
      return state.spans;
    },
    get posts() {
      return state.posts;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** OTLP JSON ids are hex; tolerate base64 too. */
function hex(id: string): string {
  return /^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16) ? id.toLowerCase() : Buffer.from(id, "base64").toString("hex");
}

function attrsOf(s: OtlpSpan): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const a of s.attributes ?? []) out[a.key] = a.value.stringValue ?? a.value.boolValue ?? a.value.doubleValue ?? Number(a.value.intValue);
  return out;
}

const randomHex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
const SECRET = "SECRET-INPUT-7f3a9";
const tools: TestTool[] = [{ name: "lookup", description: "Looks something up", parameters: { type: "object", properties: { key: { type: "string" } } } }];

/** A gateway's Sandbox client that can send metadata (the shared client does not). */
function rawSandbox(address: string) {
  const Ctor = grpc.makeGenericClientConstructor(serviceDefinition(Sandbox), "Sandbox");
  return new Ctor(address, grpc.credentials.createInsecure()) as unknown as grpc.Client &
    Record<string, (req: unknown, md: grpc.Metadata) => AsyncIterable<ExecEvent>>;
}

function traceMetadata(traceId: string, parentSpanId: string, tracestate?: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("traceparent", `00-${traceId}-${parentSpanId}-01`);
  if (tracestate) md.set("tracestate", tracestate);
  return md;
}

describe("tracing configuration from the standard environment variables", () => {
  it("is off unless an OTLP endpoint or exporter is configured, and OTEL_SDK_DISABLED or exporter none turn it off", () => {
    expect(tracingConfig({}).enabled).toBe(false);
    expect(tracingConfig({ OTEL_SERVICE_NAME: "x" }).enabled).toBe(false);
    expect(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })).toEqual({ enabled: true, endpoint: "http://c:4318" });
    expect(tracingConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" }).enabled).toBe(true);
    expect(tracingConfig({ OTEL_TRACES_EXPORTER: "otlp" })).toEqual({ enabled: true, endpoint: "http://localhost:4318" });
    expect(tracingConfig({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).enabled).toBe(false);
    expect(tracingConfig({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).enabled).toBe(false);
  });
});

describe("spans of exec, wait and nested calls, parented to the gateway's trace", () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let proc: Proc;
  beforeAll(async () => {
    receiver = await startReceiver();
    proc = await spawnCodemode(["start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"], {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "codemode-under-test",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    });
  });
  afterAll(async () => {
    expect(await proc?.stop()).toBe(0);
    await receiver?.close();
  });

  const spansUntil = (check: (spans: Span[]) => boolean) =>
    until(() => check(receiver.spans) && receiver.spans, "the spans", {
      everyMs: 100,
      detail: () => `spans so far: ${JSON.stringify(receiver.spans.map((s) => [s.name, s.attrs]))}`,
    });

  it("an exec with a nested call, then a yield resumed by wait: one trace, linked spans, ids but no inputs", async () => {
    const control = createClient(Control, proc.ready.orchestrator!);
    const sandbox = createClient(Sandbox, proc.ready.sandbox!);
    const raw = rawSandbox(proc.ready.sandbox!);
    try {
      const traceId = randomHex(16);
      const gatewayExecSpan = randomHex(8);
      const { scope } = await openRun({ control }, tools);
      const execCallId = `exec-${randomHex(4)}`;
      const code = `const r = await tools.lookup({ key: "${SECRET}" }); yield_control("later"); return r.v`;
      const calls: Array<Record<string, unknown>> = [];
      const first = await collectStream(
        raw.exec!(create(ExecRequestSchema, { scope, execCallId, code }), traceMetadata(traceId, gatewayExecSpan, "vendor=gw")),
        (c) => {
          calls.push(c as unknown as Record<string, unknown>);
          void sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '{"v":5}' } });
        },
      );
      expect(first.model.status).toBe("waiting");
      const runId = first.model.runId!;
      expect(calls).toHaveLength(1);

      const gatewayWaitSpan = randomHex(8);
      const waitCallId = `wait-${randomHex(4)}`;
      const second = await collectStream(
        raw.wait!(create(WaitRequestSchema, { scope, waitCallId, codeModeRunId: runId }), traceMetadata(traceId, gatewayWaitSpan)),
      );
      expect(second.model).toMatchObject({ status: "completed", value: 5 });

      const spans = await spansUntil((all) => all.some((s) => s.name === "codemode.wait" && s.attrs["codemode.wait_call_id"] === waitCallId));
      const exec = spans.find((s) => s.name === "codemode.exec" && s.attrs["codemode.exec_call_id"] === execCallId)!;
      const tool = spans.find((s) => s.name === "codemode.tool_call" && s.attrs["codemode.call_id"] === calls[0]!.callId)!;
      const wait = spans.find((s) => s.name === "codemode.wait" && s.attrs["codemode.wait_call_id"] === waitCallId)!;
      expect(exec && tool && wait).toBeTruthy();

      expect(exec.service).toBe("codemode-under-test");
      // The exec is the gateway's child: same trace, the gateway's span as parent, its tracestate kept.
      expect(exec).toMatchObject({ traceId, parentSpanId: gatewayExecSpan, kind: 2 });
      expect(exec.traceState).toBe("vendor=gw");
      expect(exec.attrs).toMatchObject({
        "rpc.system": "grpc",
        "rpc.method": "Exec",
        "codemode.agent_run_id": scope.agentRunId,
        "codemode.agent_id": scope.agentId,
        "codemode.code_mode_run_id": runId,
        "codemode.status": "waiting",
        "codemode.wait_reason": "yield",
        "codemode.nested_calls": 1,
      });
      expect(Number(exec.attrs["codemode.snapshot_bytes"])).toBeGreaterThan(0);

      // The nested call is the exec's child, from the request to the answer.
      expect(tool).toMatchObject({ traceId, parentSpanId: exec.spanId, kind: 3 });
      expect(tool.attrs).toMatchObject({
        "codemode.tool_id": "openclaw:core:lookup",
        "codemode.tool_name": "lookup",
        "codemode.tool_source": "openclaw",
        "codemode.parent_call_id": execCallId,
        "codemode.code_mode_run_id": runId,
        "codemode.call_outcome": "ok",
      });

      // The wait is the child of the gateway's wait span, in the same trace.
      expect(wait).toMatchObject({ traceId, parentSpanId: gatewayWaitSpan, kind: 2 });
      expect(wait.attrs).toMatchObject({
        "rpc.method": "Wait",
        "codemode.code_mode_run_id": runId,
        "codemode.status": "completed",
        "codemode.agent_run_id": scope.agentRunId,
      });

      // Ids only: never the tool input, its answer, or the program text.
      const everything = JSON.stringify(spans);
      expect(everything).not.toContain(SECRET);
      expect(everything).not.toContain("yield_control");

      // Handing the context back: ToolCallRequested.trace_parent names the nested span.
      expect(calls[0]!.traceParent).toBe(`00-${traceId}-${tool.spanId}-01`);
      expect(calls[0]!.traceState).toBe("vendor=gw");
    } finally {
      raw.close();
      control.close();
      sandbox.close();
    }
  });

  it("an exec without trace context starts its own trace; a failed one is marked as an error", async () => {
    const control = createClient(Control, proc.ready.orchestrator!);
    const sandbox = createClient(Sandbox, proc.ready.sandbox!);
    try {
      const { scope } = await openRun({ control }, tools);
      const execCallId = `exec-${randomHex(4)}`;
      const out = await collectStream(sandbox.exec({ scope, execCallId, code: "throw new Error('no')" }));
      expect(out.model.status).toBe("failed");
      const spans = await spansUntil((all) => all.some((s) => s.attrs["codemode.exec_call_id"] === execCallId));
      const exec = spans.find((s) => s.attrs["codemode.exec_call_id"] === execCallId)!;
      expect(exec.parentSpanId ?? "").toBe("");
      expect(exec.attrs["codemode.status"]).toBe("failed");
      expect(exec.attrs["codemode.error_code"]).toBe("uncaught");
      expect(exec.status?.code).toBe(2);
    } finally {
      control.close();
      sandbox.close();
    }
  });
});

describe("tracing off", () => {
  it("OTEL_TRACES_EXPORTER=none exports nothing even with an endpoint set", async () => {
    const receiver = await startReceiver();
    const proc = await spawnCodemode(["start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"], {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_TRACES_EXPORTER: "none",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    });
    const control = createClient(Control, proc.ready.orchestrator!);
    const sandbox = createClient(Sandbox, proc.ready.sandbox!);
    try {
      const { scope } = await openRun({ control }, tools);
      const out = await collectStream(sandbox.exec({ scope, code: "return 1" }));
      expect(out.model.status).toBe("completed");
    } finally {
      control.close();
      sandbox.close();
    }
    expect(await proc.stop()).toBe(0);
    expect(receiver.posts).toBe(0);
    expect(proc.stderr.join("\n")).not.toContain("tracing on");
    await receiver.close();
  });
});
