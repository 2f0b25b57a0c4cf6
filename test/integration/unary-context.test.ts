/**
 * A unary handler's context (src/protocol/grpc-service.ts): its signal is made only when
 * the handler reads it, and behaves as one made at the start would: read early, it aborts
 * when the client cancels; read after the client cancelled, it is already aborted; never
 * read, the call completes as any other. On a real gRPC server on 127.0.0.1.
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { addService } from "../../src/protocol/grpc-service.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { silentLogger } from "../../src/shared/logger.js";

const server = new grpc.Server();
let client: ReturnType<typeof createClient<typeof Control.method>>;

/** A promise and what settles it: the handlers and the test tell each other what happened. */
function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
/** Each handler started; what each read of its signal; a later call on the same connection arrived. */
const began = { early: deferred(), late: deferred() };
const read = { early: deferred<boolean>(), late: deferred<boolean>() };
const marker = deferred();

beforeAll(async () => {
  addService(
    server,
    Control,
    {
      async describeSurface(req, ctx) {
        const how = req.scope?.agentId ?? "";
        if (how === "early") {
          const signal = ctx.signal;
          began.early.resolve();
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
          read.early.resolve(signal.aborted);
        } else if (how === "late") {
          began.late.resolve();
          // Read only once a later call on the same connection arrived: HTTP/2 frames come in
          // order, so by then the server has taken in the client's cancel of this one.
          await marker.promise;
          read.late.resolve(ctx.signal.aborted);
        } else if (how === "marker") marker.resolve();
        return {};
      },
    },
    silentLogger(),
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = createClient(Control, `127.0.0.1:${port}`);
});

afterAll(() => {
  client?.close();
  server.forceShutdown();
});

const scope = (agentId: string) => ({ agentId, sessionId: "s", sessionKey: "k", agentRunId: "r" });

/** A call the client cancels once its handler runs. */
async function cancelledCall(agentId: "early" | "late"): Promise<void> {
  const ac = new AbortController();
  const call = client.describeSurface({ scope: scope(agentId) }, { signal: ac.signal }).catch((err: Error) => err);
  await began[agentId].promise;
  ac.abort();
  expect(await call).toMatchObject({ name: "ServiceError", message: expect.stringMatching(/cancelled on client/i) });
}

describe("a unary handler's signal, made when read", () => {
  it("aborts when the client cancels, read before", async () => {
    await cancelledCall("early");
    expect(await read.early.promise).toBe(true);
  });

  it("is already aborted when first read after the client cancelled", async () => {
    await cancelledCall("late");
    await client.describeSurface({ scope: scope("marker") });
    expect(await read.late.promise).toBe(true);
  });

  it("is not needed by a handler that never reads it", async () => {
    await expect(client.describeSurface({ scope: scope("plain") })).resolves.toMatchObject({ $typeName: "codemode.orchestrator.v1.DescribeSurfaceResponse" });
  });
});
