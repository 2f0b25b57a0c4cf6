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
const seen: Record<string, boolean> = {};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  addService(
    server,
    Control,
    {
      async describeSurface(req, ctx) {
        const how = req.scope?.agentId ?? "";
        if (how === "early") {
          const signal = ctx.signal;
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
          seen.early = signal.aborted;
        } else if (how === "late") {
          await sleep(400);
          seen.late = ctx.signal.aborted;
        }
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

async function cancelledCall(agentId: string): Promise<void> {
  const ac = new AbortController();
  const call = client.describeSurface({ scope: scope(agentId) }, { signal: ac.signal }).catch((err: Error) => err);
  await sleep(100);
  ac.abort();
  expect(await call).toBeInstanceOf(Error);
}

describe("a unary handler's signal, made when read", () => {
  it("aborts when the client cancels, read before", async () => {
    await cancelledCall("early");
    await sleep(100);
    expect(seen.early).toBe(true);
  });

  it("is already aborted when first read after the client cancelled", async () => {
    await cancelledCall("late");
    await sleep(500);
    expect(seen.late).toBe(true);
  });

  it("is not needed by a handler that never reads it", async () => {
    await expect(client.describeSurface({ scope: scope("plain") })).resolves.toBeDefined();
  });
});
