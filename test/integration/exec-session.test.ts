/**
 * ExecSession through a real `codemode start`: the gateway answers nested calls on the
 * exec's own stream (no BridgeCallback), sequential and parallel calls complete, tool
 * errors reach the guest, a refused answer (unknown call id, malformed JSON) comes back
 * as AnswerRefused while the exec goes on, a wait continues a suspended run the same way,
 * answers still work through BridgeCallback, and a first message that is not an exec or
 * a wait is INVALID_ARGUMENT.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecEvent } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ExecSessionRequestSchema } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { openRun } from "../helpers/gateway.js";
import { startStack, type Model, type Stack, type ToolCallEvent } from "../helpers/harness.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

type Init = MessageInitShape<typeof ExecSessionRequestSchema>;
type Scope = Awaited<ReturnType<typeof openRun>>["scope"];

/** Runs one session: `first` starts it; `answer` turns each nested call into the messages to send back. */
async function session(first: Init, answer: (call: ToolCallEvent) => Init[]): Promise<{ model: Model; events: ExecEvent[] }> {
  const s = stack.sandbox.execSession();
  s.send(first);
  const events: ExecEvent[] = [];
  let model: Model | undefined;
  for await (const ev of s.messages) {
    events.push(ev);
    if (ev.event.case === "toolCall") for (const m of answer(ev.event.value)) s.send(m);
    if (ev.event.case === "result") {
      model = JSON.parse(ev.event.value.modelJson) as Model;
      s.end();
    }
  }
  if (!model) throw new Error("no result");
  return { model, events };
}

const echo =
  (scope?: Scope) =>
  (call: ToolCallEvent): Init[] => [
    { message: { case: "answer", value: { ...(scope ? { scope } : {}), callId: call.callId, outcome: { case: "resultJson", value: call.inputJson } } } },
  ];
const TOOLS = [
  { name: "echo", description: "returns its input", parameters: { type: "object" } },
  { name: "slow", description: "answered later", parameters: { type: "object" } },
];

describe("ExecSession", () => {
  it("answers sequential and parallel nested calls on the exec's stream", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const seq = await session(
      { message: { case: "exec", value: { scope, code: "let s = 0; for (let i = 0; i < 10; i++) s += (await tools.echo({ i })).i; return s" } } },
      echo(),
    );
    expect(seq.model).toMatchObject({ status: "completed", value: 45 });
    const par = await session(
      {
        message: {
          case: "exec",
          value: {
            scope,
            code: "const xs = await Promise.all(Array.from({ length: 16 }, (_, i) => tools.echo({ i }))); return xs.reduce((a, x) => a + x.i, 0)",
          },
        },
      },
      echo(scope),
    );
    expect(par.model).toMatchObject({ status: "completed", value: 120 });
    expect(par.events.filter((e) => e.event.case === "toolCall")).toHaveLength(16);
  });

  it("delivers tool errors, and refuses bad answers with AnswerRefused while the exec goes on", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const out = await session(
      { message: { case: "exec", value: { scope, code: "try { await tools.echo({}); } catch (e) { return e.name + ': ' + e.message; }" } } },
      (call) => [
        { message: { case: "answer", value: { callId: "c_no_such_call", outcome: { case: "resultJson", value: "1" } } } },
        { message: { case: "answer", value: { callId: call.callId, outcome: { case: "resultJson", value: "{not json" } } } },
        { message: { case: "answer", value: { callId: call.callId, outcome: { case: "error", value: { name: "ToolFailed", message: "the tool broke" } } } } },
      ],
    );
    expect(out.model).toMatchObject({ status: "completed", value: "ToolFailed: the tool broke" });
    const refused = out.events.flatMap((e) => (e.event.case === "answerRefused" ? [e.event.value] : []));
    expect(refused.map((r) => [r.callId, r.code])).toEqual([
      ["c_no_such_call", "not_found"],
      [expect.stringMatching(/^c_/), "invalid_argument"],
    ]);
  });

  it("continues a suspended run with a wait session, and still takes BridgeCallback answers", async () => {
    const { scope } = await openRun(stack, TOOLS);
    let pending: ToolCallEvent | undefined;
    const first = await session(
      {
        message: {
          case: "exec",
          value: { scope, code: "const r = await tools.slow({ n: 1 }); return await tools.echo({ got: r.n });", config: { timeoutMs: 300 } },
        },
      },
      (call) => {
        pending = call;
        return [];
      },
    );
    expect(first.model).toMatchObject({ status: "waiting", reason: "pending_tools" });
    // The slow tool's answer arrives while the run is suspended, through BridgeCallback.
    await stack.sandbox.bridgeCallback({ scope, callId: pending!.callId, outcome: { case: "resultJson", value: '{"n":7}' } });
    const resumed = await session({ message: { case: "wait", value: { scope, codeModeRunId: first.model.runId! } } }, echo());
    expect(resumed.model).toMatchObject({ status: "completed", value: { got: 7 } });
  });

  it("ends with its result when the gateway half-closes right after the exec (no answers to send)", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const s = stack.sandbox.execSession({ signal: AbortSignal.timeout(10_000) });
    s.send({ message: { case: "exec", value: { scope, code: "await new Promise((r) => setTimeout(r, 200)); return 5" } } });
    // Before, the half-close ended the server's read of the call, which destroyed it: the
    // result and status never arrived and the gateway waited for its deadline.
    s.end();
    let model: Model | undefined;
    for await (const ev of s.messages) if (ev.event.case === "result") model = JSON.parse(ev.event.value.modelJson) as Model;
    expect(model).toMatchObject({ status: "completed", value: 5 });
  });

  it("refuses a session whose first message is an answer", async () => {
    const s = stack.sandbox.execSession();
    s.send({ message: { case: "answer", value: { callId: "c_x", outcome: { case: "resultJson", value: "1" } } } } satisfies Init);
    await expect(
      (async () => {
        for await (const _ of s.messages) {
          // nothing arrives before the error
        }
      })(),
    ).rejects.toMatchObject({ code: "invalid_argument" });
  });
});
