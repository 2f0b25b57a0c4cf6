/**
 * Services built at their first call (src/protocol/deferred-service.ts), on real gRPC
 * servers on 127.0.0.1: nothing is built at registration; the first call of any method
 * builds the library's service once, for unary and streaming calls alike; health
 * statuses set before that are what the library answers; and a library that cannot be
 * built fails each call with INTERNAL and a reason instead of hanging or crashing.
 */
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { addDeferred } from "../../src/protocol/deferred-service.js";
import { ServingHealth, LIVENESS } from "../../src/protocol/health.js";
import { healthClient } from "../helpers/health-client.js";

const raw = (b: Buffer) => b;
const open: { server: grpc.Server; clients: grpc.Client[] }[] = [];

async function serve(add: (server: grpc.Server) => void): Promise<string> {
  const server = new grpc.Server();
  add(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  open.push({ server, clients: [] });
  return `127.0.0.1:${port}`;
}

function client(address: string): grpc.Client {
  const c = new grpc.Client(address, grpc.credentials.createInsecure());
  open.at(-1)!.clients.push(c);
  return c;
}

afterEach(() => {
  for (const { server, clients } of open.splice(0)) {
    for (const c of clients) c.close();
    server.forceShutdown();
  }
});

function unary(c: grpc.Client, path: string, body: Buffer): Promise<{ err?: grpc.ServiceError; reply?: Buffer }> {
  return new Promise((resolve) => c.makeUnaryRequest(path, raw, raw, body, (err, reply) => resolve(err ? { err } : { reply: reply! })));
}

/** An echo service as a library would add it: unary Echo and server-streaming Repeat (its request's bytes, three times). */
const echoDefinition: grpc.ServiceDefinition = {
  Echo: {
    path: "/t.Echo/Echo",
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
  Repeat: {
    path: "/t.Echo/Repeat",
    requestStream: false,
    responseStream: true,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
};
const echoImplementation: grpc.UntypedServiceImplementation = {
  Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
  Repeat: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
    for (let i = 0; i < 3; i++) call.write(call.request);
    call.end();
  },
};
const echoMethods = { "/t.Echo/Echo": "unary", "/t.Echo/Repeat": "serverStream" } as const;

describe("addDeferred", () => {
  it("builds the service at the first call, once, and then serves unary and streaming calls as the library does", async () => {
    let builds = 0;
    let built = 0;
    const address = await serve((server) =>
      addDeferred(
        server,
        {
          name: "echo",
          methods: echoMethods,
          addTo: (target) => {
            builds++;
            target.addService(echoDefinition, echoImplementation);
          },
        },
        () => built++,
      ),
    );
    expect(builds).toBe(0);
    const c = client(address);
    const stream = c.makeServerStreamRequest("/t.Echo/Repeat", raw, raw, Buffer.from("hi"));
    const got: string[] = [];
    for await (const chunk of stream) got.push(String(chunk));
    expect(got).toEqual(["hi", "hi", "hi"]);
    expect(await unary(c, "/t.Echo/Echo", Buffer.from("again"))).toEqual({ reply: Buffer.from("again") });
    expect([builds, built]).toEqual([1, 1]);
  });

  it("fails every call with INTERNAL and the reason when the library cannot be built", async () => {
    let builds = 0;
    const address = await serve((server) =>
      addDeferred(server, {
        name: "echo",
        methods: echoMethods,
        addTo: () => {
          builds++;
          throw new Error("module not found");
        },
      }),
    );
    const c = client(address);
    for (let i = 0; i < 2; i++) {
      const { err } = await unary(c, "/t.Echo/Echo", Buffer.from("x"));
      expect(err?.code).toBe(grpc.status.INTERNAL);
    }
    const stream = c.makeServerStreamRequest("/t.Echo/Repeat", raw, raw, Buffer.from("x"));
    const streamErr = await new Promise<grpc.ServiceError>((resolve) => {
      stream.on("error", resolve);
      stream.on("data", () => {});
    });
    expect(streamErr.code).toBe(grpc.status.INTERNAL);
    expect(streamErr.details).toMatch(/echo is unavailable: module not found/);
    expect(builds).toBeGreaterThanOrEqual(3);
  });

  it("refuses a library that does not add a declared method, or adds it as another kind", async () => {
    const address = await serve((server) => {
      addDeferred(server, {
        name: "missing",
        methods: { "/t.Echo/Echo": "unary", "/t.Echo/Gone": "unary" },
        addTo: (t) => t.addService(echoDefinition, echoImplementation),
      });
    });
    const { err } = await unary(client(address), "/t.Echo/Echo", Buffer.from("x"));
    expect(err?.code).toBe(grpc.status.INTERNAL);
    const other = await serve((server) => {
      addDeferred(server, { name: "kind", methods: { "/t.Echo/Repeat": "unary" }, addTo: (t) => t.addService(echoDefinition, echoImplementation) });
    });
    const r = await unary(client(other), "/t.Echo/Repeat", Buffer.from("x"));
    expect(r.err?.code).toBe(grpc.status.INTERNAL);
  });
});

describe("ServingHealth, loaded at the first health call", () => {
  it("answers with the statuses set before it loaded, on every server it was added to, and hears later changes", async () => {
    const health = new ServingHealth(["t.Svc"]);
    const a = await serve((server) => health.addToServer(server));
    const b = await serve((server) => health.addToServer(server));
    health.set(true);
    const ha = healthClient(a);
    const hb = healthClient(b);
    try {
      const watch = hb.watch("t.Svc");
      await watch.until("SERVING");
      expect(await ha.check("")).toBe("SERVING");
      expect(await ha.check(LIVENESS)).toBe("SERVING");
      expect(await ha.check("t.Other")).toBe("NOT_FOUND");
      health.set(false);
      await watch.until("NOT_SERVING");
      expect(await hb.check("t.Svc")).toBe("NOT_SERVING");
      expect(await ha.check(LIVENESS)).toBe("SERVING");
      watch.close();
    } finally {
      ha.close();
      hb.close();
    }
  });
});
