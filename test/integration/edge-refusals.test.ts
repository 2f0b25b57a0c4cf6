/**
 * Cheap refusals at the edge, through a real `codemode start`: request bytes that do not
 * decode are INVALID_ARGUMENT (not INTERNAL) on every kind of method, an id or scope
 * field over its limit is INVALID_ARGUMENT naming the field and the limit, and Exec or
 * Wait on a scope no gateway opened is FAILED_PRECONDITION with DescribeSurface's message.
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ID_LIMITS } from "../../src/shared/request-limits.js";
import { NO_OPEN_RUN } from "../../src/shared/scope.js";
import { collectStream, execute, openEmptyRun, scope as newScope, startStack, type Stack } from "../helpers/harness.js";

let stack: Stack;
let raw: { sandbox: grpc.Client; orchestrator: grpc.Client };

beforeAll(async () => {
  stack = await startStack();
  raw = {
    sandbox: new grpc.Client(stack.sandboxAddress, grpc.credentials.createInsecure()),
    orchestrator: new grpc.Client(stack.orchestratorAddress, grpc.credentials.createInsecure()),
  };
});

afterAll(async () => {
  raw?.sandbox.close();
  raw?.orchestrator.close();
  expect(await stack?.stop()).toBe(0);
});

const identity = (b: Buffer) => b;
type Status = { code: number; details: string };

function unaryRaw(client: grpc.Client, path: string, bytes: Buffer): Promise<Status> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, identity, identity, bytes, (err) =>
      resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: "" }),
    );
  });
}

function streamRaw(client: grpc.Client, path: string, bytes: Buffer): Promise<Status> {
  return new Promise((resolve) => {
    const call = client.makeServerStreamRequest(path, identity, identity, bytes);
    call.on("data", () => {});
    call.on("error", (err: grpc.ServiceError) => resolve({ code: err.code, details: err.details }));
    call.on("status", (s: grpc.StatusObject) => resolve({ code: s.code, details: s.details }));
  });
}

/** Bytes no protobuf decoder accepts: a length-delimited field whose length never ends, and a wire type that does not exist. */
const GARBAGE = [Buffer.from([0x0a, 0xff, 0xff]), Buffer.from([0x0f, 0x01, 0x02])];

describe("malformed request bytes are INVALID_ARGUMENT", () => {
  it("on unary and server-streaming methods of both ports, and the servers keep serving", async () => {
    for (const bytes of GARBAGE) {
      const results = [
        await streamRaw(raw.sandbox, "/codemode.sandbox.v1.Sandbox/Exec", bytes),
        await streamRaw(raw.sandbox, "/codemode.sandbox.v1.Sandbox/Wait", bytes),
        await unaryRaw(raw.sandbox, "/codemode.sandbox.v1.Sandbox/BridgeCallback", bytes),
        await unaryRaw(raw.orchestrator, "/codemode.orchestrator.v1.Control/OpenRun", bytes),
        await unaryRaw(raw.orchestrator, "/codemode.orchestrator.v1.Control/DescribeSurface", bytes),
      ];
      for (const r of results) {
        expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
        expect(r.details).toMatch(/^malformed request: could not decode codemode\.\w+\.v1\.\w+Request/);
      }
    }
    expect((await execute(stack, { code: "return 'still serving'" })).model.value).toBe("still serving");
  });
});

describe("id and scope fields over their limits are INVALID_ARGUMENT naming the field", () => {
  const over = (field: keyof typeof ID_LIMITS) => "x".repeat(ID_LIMITS[field] + 1);
  const message = (path: string, field: keyof typeof ID_LIMITS) => `${path} is ${ID_LIMITS[field] + 1} bytes, over the limit of ${ID_LIMITS[field]} bytes`;

  it("each scope field, on the sidecar and on the orchestrator", async () => {
    const fields = [
      ["agentId", "agent_id"],
      ["sessionId", "session_id"],
      ["sessionKey", "session_key"],
      ["agentRunId", "agent_run_id"],
    ] as const;
    for (const [key, field] of fields) {
      const s = { ...newScope("lim"), [key]: over(field) };
      const expected = { code: "invalid_argument", message: message(`scope.${field}`, field) };
      await expect(collectStream(stack.sandbox.exec({ scope: s, code: "return 1" }))).rejects.toMatchObject(expected);
      await expect(collectStream(stack.sandbox.wait({ scope: s, codeModeRunId: "cm_x" }))).rejects.toMatchObject(expected);
      await expect(stack.sandbox.bridgeCallback({ scope: s, callId: "c1", outcome: { case: "resultJson", value: "1" } })).rejects.toMatchObject(expected);
      await expect(stack.control.openRun({ scope: s, catalog: { case: "tools", value: { tools: [] } } })).rejects.toMatchObject(expected);
      await expect(stack.control.describeSurface({ scope: s })).rejects.toMatchObject(expected);
    }
  });

  it("exec_call_id, wait_call_id, run_id, call_id and catalog_id", async () => {
    const s = await openEmptyRun(stack.control, "lim");
    await expect(collectStream(stack.sandbox.exec({ scope: s, execCallId: over("exec_call_id"), code: "return 1" }))).rejects.toMatchObject({
      code: "invalid_argument",
      message: message("exec_call_id", "exec_call_id"),
    });
    await expect(collectStream(stack.sandbox.wait({ scope: s, waitCallId: over("wait_call_id"), codeModeRunId: "cm_x" }))).rejects.toMatchObject({
      code: "invalid_argument",
      message: message("wait_call_id", "wait_call_id"),
    });
    await expect(collectStream(stack.sandbox.wait({ scope: s, codeModeRunId: over("code_mode_run_id") }))).rejects.toMatchObject({
      code: "invalid_argument",
      message: message("code_mode_run_id", "code_mode_run_id"),
    });
    await expect(stack.sandbox.bridgeCallback({ scope: s, callId: over("call_id"), outcome: { case: "resultJson", value: "1" } })).rejects.toMatchObject({
      code: "invalid_argument",
      message: message("call_id", "call_id"),
    });
    await expect(stack.control.openRun({ scope: newScope("lim"), catalog: { case: "catalogId", value: over("catalog_id") } })).rejects.toMatchObject({
      code: "invalid_argument",
      message: message("catalog_id", "catalog_id"),
    });
  });

  it("limits count UTF-8 bytes, and a value exactly at the limit passes", async () => {
    const atLimit = { ...newScope("lim"), agentId: "a".repeat(ID_LIMITS.agent_id) };
    await stack.control.openRun({ scope: atLimit, catalog: { case: "tools", value: { tools: [] } } });
    expect((await execute(stack, { scope: atLimit, code: "return 'at the limit'" })).model.value).toBe("at the limit");
    // 129 characters, 258 bytes.
    const wide = { ...newScope("lim"), agentId: "é".repeat(129) };
    await expect(stack.control.openRun({ scope: wide, catalog: { case: "tools", value: { tools: [] } } })).rejects.toMatchObject({
      code: "invalid_argument",
      message: `scope.agent_id is 258 bytes, over the limit of ${ID_LIMITS.agent_id} bytes`,
    });
  });
});

describe("a scope no gateway opened", () => {
  it("Exec and Wait are FAILED_PRECONDITION with the message DescribeSurface gives", async () => {
    const s = newScope("unopened");
    const described = await stack.control.describeSurface({ scope: s }).catch((err: unknown) => err as { code: string; message: string });
    expect(described).toMatchObject({ message: NO_OPEN_RUN });
    await expect(collectStream(stack.sandbox.exec({ scope: s, code: "return 1" }))).rejects.toMatchObject({
      code: "failed_precondition",
      message: NO_OPEN_RUN,
    });
    await expect(collectStream(stack.sandbox.wait({ scope: s, codeModeRunId: "cm_never" }))).rejects.toMatchObject({
      code: "failed_precondition",
      message: NO_OPEN_RUN,
    });
    // Once opened, the same scope runs.
    await stack.control.openRun({ scope: s, catalog: { case: "tools", value: { tools: [] } } });
    expect((await execute(stack, { scope: s, code: "return 'opened'" })).model.value).toBe("opened");
  });
});

describe("per-run caps are refused inside the guest at once", () => {
  it("maxToolCallsPerRun and maxSearchesPerRun refuse further calls with a catchable RangeError", async () => {
    const { openRun, gatewayExec } = await import("../helpers/gateway.js");
    const tools = [{ name: "ping", description: "Ping.", handler: () => "pong" }];
    const { scope } = await openRun(stack, tools, {}, { config: { maxToolCallsPerRun: 3, maxSearchesPerRun: 2 } });
    const out = await gatewayExec(
      stack,
      scope,
      tools,
      `
      const calls = [];
      for (let i = 0; i < 5; i++) { try { calls.push(await tools.ping({})); } catch (e) { calls.push(e.name + ": " + e.message); } }
      const searches = [];
      for (let i = 0; i < 3; i++) { try { searches.push((await tools.search("ping")).length); } catch (e) { searches.push(e.name); } }
      return { calls, searches };`,
    );
    expect(out.model.value).toEqual({
      calls: [
        "pong",
        "pong",
        "pong",
        "RangeError: this run made 3 tool calls, its limit (maxToolCallsPerRun).",
        "RangeError: this run made 3 tool calls, its limit (maxToolCallsPerRun).",
      ],
      searches: [1, 1, "RangeError"],
    });
    expect(out.answered).toHaveLength(3);
    // The caps count over the whole agent run: the next exec is refused at once too.
    const next = await gatewayExec(stack, scope, tools, `try { await tools.ping({}); return "called"; } catch (e) { return e.name; }`);
    expect(next.model.value).toBe("RangeError");
  });
});
