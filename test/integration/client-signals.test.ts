/**
 * The typed client's cancellation (src/protocol/grpc-client.ts), on a real gRPC server on
 * 127.0.0.1: a signal aborted before the call cancels it at once (unary, server stream and
 * bidi stream alike), one aborted during a call cancels it, and a signal that outlives its
 * calls holds no listener for any of them once they are over.
 */
import { getEventListeners } from "node:events";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { addService } from "../../src/protocol/grpc-service.js";
import { ServiceError } from "../../src/protocol/service-error.js";
import { silentLogger } from "../../src/shared/logger.js";
import { until } from "../helpers/until.js";

const server = new grpc.Server();
let control: ReturnType<typeof createClient<typeof Control.method>>;
let sandbox: ReturnType<typeof createClient<typeof Sandbox.method>>;
const scope = (agentId: string) => ({ agentId, sessionId: "s", sessionKey: "k", agentRunId: "r" });
/** Hanging handlers that started, by agent id: the call is in flight at the server. */
const hanging = new Map<string, number>();
/** Handlers that answer at once, or wait for the client to go when the agent id starts with "hang". */
const hangs = (agentId: string | undefined, signal: AbortSignal) => {
  if (!agentId?.startsWith("hang")) return Promise.resolve();
  hanging.set(agentId, (hanging.get(agentId) ?? 0) + 1);
  return new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
};

beforeAll(async () => {
  const log = silentLogger();
  addService(
    server,
    Control,
    {
      async describeSurface(req, ctx) {
        await hangs(req.scope?.agentId, ctx.signal);
        return {};
      },
    },
    log,
  );
  addService(
    server,
    Sandbox,
    {
      async exec(req, stream) {
        await hangs(req.scope?.agentId, stream.signal);
        stream.send({ event: { case: "result", value: { status: 1, valueJson: "1" } } });
      },
      async execSession(stream) {
        for await (const m of stream.messages) {
          if (m.message.case !== "exec") continue;
          await hangs(m.message.value.scope?.agentId, stream.signal);
          stream.send({ event: { case: "result", value: { status: 1, valueJson: "1" } } });
          return;
        }
      },
    },
    log,
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  control = createClient(Control, `127.0.0.1:${port}`);
  sandbox = createClient(Sandbox, `127.0.0.1:${port}`);
});

afterAll(() => {
  control?.close();
  sandbox?.close();
  server.forceShutdown();
});

/** The error a promise rejects with (or "resolved"). */
const failure = (p: Promise<unknown>) =>
  p.then(
    () => "resolved",
    (err: unknown) => err,
  );
async function drain(stream: AsyncIterable<unknown>): Promise<number> {
  let n = 0;
  for await (const _ of stream) n++;
  return n;
}

describe("a call's AbortSignal", () => {
  it("cancels at once when it was aborted before the call", async () => {
    const signal = AbortSignal.abort();
    const results = await Promise.all([
      failure(control.describeSurface({ scope: scope("hang") }, { signal })),
      failure(drain(sandbox.exec({ scope: scope("hang"), code: "" }, { signal }))),
      failure(
        (async () => {
          const s = sandbox.execSession({ signal });
          s.send({ message: { case: "exec", value: { scope: scope("hang"), code: "" } } });
          return drain(s.messages);
        })(),
      ),
    ]);
    for (const r of results) {
      expect(r).toBeInstanceOf(ServiceError);
      expect((r as Error).message).toMatch(/cancelled on client/i);
    }
  });

  it("cancels a call in flight when it aborts", async () => {
    const ac = new AbortController();
    const unary = failure(control.describeSurface({ scope: scope("hang-in-flight") }, { signal: ac.signal }));
    const stream = failure(drain(sandbox.exec({ scope: scope("hang-in-flight"), code: "" }, { signal: ac.signal })));
    // Both handlers run: the calls are in flight when the signal aborts.
    await until(() => hanging.get("hang-in-flight") === 2, "both calls to reach the server", { everyMs: 10 });
    ac.abort();
    expect(((await unary) as Error).message).toMatch(/cancelled on client/i);
    expect(((await stream) as Error).message).toMatch(/cancelled on client/i);
  });

  it("keeps no listener once its calls are over", async () => {
    const ac = new AbortController();
    for (let i = 0; i < 20; i++) {
      await control.describeSurface({ scope: scope("quick") }, { signal: ac.signal });
      expect(await drain(sandbox.exec({ scope: scope("quick"), code: "" }, { signal: ac.signal }))).toBe(1);
      const s = sandbox.execSession({ signal: ac.signal });
      s.send({ message: { case: "exec", value: { scope: scope("quick"), code: "" } } });
      const n = drain(s.messages);
      s.end();
      expect(await n).toBe(1);
    }
    // A failed call lets go too.
    const failed = failure(control.describeSurface({ scope: scope("hang") }, { signal: ac.signal, deadlineMs: 50 }));
    expect(((await failed) as Error).message).toMatch(/deadline exceeded/i);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });
});
