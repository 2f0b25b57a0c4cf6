// What a round trip costs between a grpc-js client and server in one process (the embedded
// orchestrator and its sidecar): a unary call against a request and a reply on an open
// bidirectional stream, side by side in the same run. Why the sidecar's link calls ride its
// standing Attach stream (src/sandbox/link/link-calls.ts). Prints figures; asserts nothing.
//
// Usage: node bench/link-rtt.bench.mjs [--n 3000] [--bytes 200]
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";

const { values } = parseArgs({ options: { n: { type: "string", default: "3000" }, bytes: { type: "string", default: "200" } } });
const N = Number(values.n);
const same = { requestSerialize: (b) => b, requestDeserialize: (b) => b, responseSerialize: (b) => b, responseDeserialize: (b) => b };
const def = {
  unary: { path: "/bench.Rtt/Unary", requestStream: false, responseStream: false, ...same },
  bidi: { path: "/bench.Rtt/Bidi", requestStream: true, responseStream: true, ...same },
};
const server = new grpc.Server();
server.addService(def, { unary: (call, cb) => cb(null, call.request), bidi: (call) => call.on("data", (d) => call.write(d)).on("end", () => call.end()) });
const port = await new Promise((resolve, reject) =>
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
);
const Client = grpc.makeGenericClientConstructor(def, "Rtt");
const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
const msg = Buffer.alloc(Number(values.bytes), 1);
const unary = () => new Promise((resolve, reject) => client.unary(msg, (e, v) => (e ? reject(e) : resolve(v))));
const stream = client.bidi();
stream.on("error", () => undefined);
let waiting;
stream.on("data", () => waiting?.());
const onStream = () => new Promise((resolve) => ((waiting = resolve), stream.write(msg)));

const results = { unary: [], stream: [] };
for (let round = 0; round < 2; round++) {
  for (const [name, f] of [
    ["unary", unary],
    ["stream", onStream],
  ]) {
    for (let i = 0; i < 300; i++) await f();
    const t = [];
    for (let i = 0; i < N; i++) {
      const t0 = performance.now();
      await f();
      t.push(performance.now() - t0);
    }
    results[name].push(...t);
  }
}
const pct = (a, p) => a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))] * 1000;
console.log(`node ${process.version}, ${N} x 2 round trips each of ${msg.length} bytes, alternating rounds`);
console.log("| round trip | p50 | p99 |");
console.log("|---|---|---|");
for (const name of ["unary", "stream"])
  console.log(
    `| ${name === "unary" ? "unary call" : "message on an open stream"} | ${pct(results[name], 0.5).toFixed(0)} µs | ${pct(results[name], 0.99).toFixed(0)} µs |`,
  );
stream.end();
client.close();
server.forceShutdown();
