/**
 * Link calls on the Attach stream (LinkCall / LinkReply): a real orchestrator answers
 * them as it answers the unary methods, and the sidecar's side of it (StreamCalls,
 * linkRpc) matches replies to calls, fails like a unary call when the stream ends, the
 * deadline passes or the caller cancels, and uses unary calls when the orchestrator does
 * not take calls on the stream.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LinkReplySchema, SidecarLink, type AttachResponse } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { ServiceError } from "../../src/protocol/service-error.js";
import { linkRpc, StreamCalls, type LinkRpc } from "../../src/sandbox/link/link-calls.js";
import { spawnCodemode, type Proc } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

describe("an orchestrator answering link calls on the Attach stream", () => {
  let orchestrator: Proc;
  let link: ServiceClient<typeof SidecarLink.method>;
  beforeAll(async () => {
    orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
    link = createClient(SidecarLink, orchestrator.ready.link!);
  }, 60_000);
  afterAll(async () => {
    link?.close();
    await orchestrator?.stop();
  });

  it("says so in its welcome, and answers each call as the unary method does, by id", async () => {
    const stream = link.attach();
    const replies = stream.messages[Symbol.asyncIterator]();
    const next = async (): Promise<AttachResponse> => (await replies.next()).value as AttachResponse;
    stream.send({ message: { case: "hello", value: { sidecarId: "sc_test", address: "127.0.0.1:1", version: "test" } } });
    const welcome = await next();
    expect(welcome.message.case === "welcome" && welcome.message.value.takesCalls).toBe(true);

    const scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };
    const claim = { scope, codeModeRunId: "cm_unknown", leaseMs: 1_000, claimToken: "t" };
    stream.send({ message: { case: "call", value: { id: 7n, request: { case: "claimRun", value: claim } } } });
    stream.send({ message: { case: "call", value: { id: 8n, request: { case: "resolveRun", value: {} } } } });
    stream.send({ message: { case: "call", value: { id: 9n } } });
    const byId = new Map<bigint, AttachResponse>();
    for (let i = 0; i < 3; i++) {
      const m = await next();
      if (m.message.case === "reply") byId.set(m.message.value.id, m);
    }
    const reply = (id: bigint) => {
      const m = byId.get(id)!.message;
      return m.case === "reply" ? m.value.response : undefined;
    };
    // The same refusal and the same error as the unary calls.
    const unaryClaim = await link.claimRun(claim);
    expect(reply(7n)).toMatchObject({ case: "claimRun", value: { refused: unaryClaim.refused } });
    expect(unaryClaim.refused).toBe("code mode run is unavailable or expired.");
    const unaryError = await link.resolveRun({}).catch((err: ServiceError) => err);
    expect(unaryError).toBeInstanceOf(ServiceError);
    expect(reply(8n)).toMatchObject({ case: "error", value: { code: (unaryError as ServiceError).code, message: (unaryError as ServiceError).message } });
    expect(reply(9n)).toMatchObject({ case: "error", value: { code: "invalid_argument", message: "a link call must name its request" } });
    stream.end();
  });

  it("keeps serving when a sidecar closes its side with calls in flight (their replies have no stream left)", async () => {
    const scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };
    const from = orchestrator.stderr.length;
    for (let i = 0; i < 5; i++) {
      const stream = link.attach();
      stream.send({ message: { case: "hello", value: { sidecarId: `sc_gone_${i}`, address: "127.0.0.1:1", version: "test" } } });
      for (let c = 1n; c <= 20n; c++)
        stream.send({
          message: {
            case: "call",
            value: { id: c, request: { case: "claimRun", value: { scope, codeModeRunId: `cm_${c}`, leaseMs: 1_000, claimToken: "t" } } },
          },
        });
      stream.end();
      for await (const _ of stream.messages) {
        // drained until the orchestrator ends its side
      }
    }
    // Every call was answered (each refusal is logged) after its stream was gone.
    await until(() => orchestrator.stderr.slice(from).filter((l) => l.includes('"msg":"refused a wait"')).length >= 100, "the 100 calls to be answered", {
      detail: () => orchestrator.stderr.slice(from).join("\n"),
    });
    expect(orchestrator.child.exitCode).toBeNull();
    expect((await link.claimRun({ scope, codeModeRunId: "cm_after", leaseMs: 1_000, claimToken: "t" })).refused).toBe(
      "code mode run is unavailable or expired.",
    );
  });
});

describe("the sidecar's link calls", () => {
  const sent: Array<{ id: bigint; method: string | undefined }> = [];
  const calls = () =>
    new StreamCalls((c) => {
      const call = c as { id: bigint; request?: { case?: string } };
      sent.push({ id: call.id, method: call.request?.case });
    });
  const reply = (id: bigint, response: MessageInitShape<typeof LinkReplySchema>["response"]) =>
    create(LinkReplySchema, { id, response } as MessageInitShape<typeof LinkReplySchema>);

  it("matches replies to calls by id, and rebuilds the orchestrator's errors", async () => {
    sent.length = 0;
    const c = calls();
    const first = c.call("releaseRun", { codeModeRunId: "cm_1", claimToken: "t", keep: false });
    const second = c.call("claimRun", { codeModeRunId: "cm_2" });
    const third = c.call("resolveRun", {});
    expect(sent.map((s) => s.method)).toEqual(["releaseRun", "claimRun", "resolveRun"]);
    const [a, b, d] = sent.map((s) => s.id);
    c.reply(reply(b!, { case: "error", value: { code: "invalid_argument", message: "claim_token is longer than 128 characters" } }));
    c.reply(reply(a!, { case: "releaseRun", value: { released: true } }));
    // A reply of another method's shape is a broken orchestrator, not a success.
    c.reply(reply(d!, { case: "claimRun", value: {} }));
    expect(await first).toMatchObject({ released: true });
    await expect(second).rejects.toMatchObject({ code: "invalid_argument", message: "claim_token is longer than 128 characters" });
    await expect(third).rejects.toMatchObject({ code: "internal" });
  });

  it("fails calls as unavailable when the stream ends, the deadline passes or the caller cancels, and drops late replies", async () => {
    sent.length = 0;
    const c = calls();
    const timedOut = c.call("suspendRun", {}, { deadlineMs: 20 });
    await expect(timedOut).rejects.toMatchObject({ code: "unavailable", message: "the orchestrator did not answer suspendRun within 20 ms" });
    c.reply(reply(sent[0]!.id, { case: "suspendRun", value: {} }));
    const ac = new AbortController();
    const cancelled = c.call("claimRun", {}, { signal: ac.signal });
    ac.abort();
    await expect(cancelled).rejects.toMatchObject({ code: "unavailable", message: "claimRun was cancelled" });
    const cut = c.call("resolveRun", {});
    c.close();
    await expect(cut).rejects.toMatchObject({ code: "unavailable", message: "the orchestrator link closed before the call was answered" });
    await expect(c.call("resolveRun", {})).rejects.toMatchObject({ code: "unavailable" });
  });

  it("makes unary calls while no stream takes them", async () => {
    const unary: string[] = [];
    const client = Object.fromEntries(
      ["resolveRun", "suspendRun", "claimRun", "releaseRun", "routeToolResult"].map((m) => [m, async () => (unary.push(m), { via: "unary" })]),
    ) as unknown as LinkRpc;
    let stream: StreamCalls | undefined;
    const rpc = linkRpc(client, () => stream);
    expect(await rpc.claimRun({})).toEqual({ via: "unary" });
    sent.length = 0;
    stream = calls();
    const onStream = rpc.claimRun({ codeModeRunId: "cm_3" });
    stream.reply(reply(sent[0]!.id, { case: "claimRun", value: { claimToken: "tok" } }));
    expect(await onStream).toMatchObject({ claimToken: "tok" });
    expect(unary).toEqual(["claimRun"]);
  });
});
