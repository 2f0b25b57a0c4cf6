// A worker thread of the throughput floor: runs W1 floor VMs back to back. Protocol with
// the parent: it warms up and posts "ready"; on "go" it runs `runs` programs and posts the
// per-run latencies. Started by ./floor-threads.mjs, one per concurrent slot.
import { parentPort } from "node:worker_threads";
import { loadWasm, runFloor } from "./floor.mjs";
import { W1, EXPECT } from "./workloads.mjs";

const wasm = await loadWasm();
const once = async () => {
  const v = await runFloor(wasm, W1);
  if (v !== EXPECT.W1) throw new Error(`floor W1 gave ${v}`);
};
for (let i = 0; i < 20; i++) await once();
parentPort.on("message", async (m) => {
  if (m.type !== "go") return;
  const samples = [];
  for (let i = 0; i < m.runs; i++) {
    const t = performance.now();
    await once();
    samples.push(performance.now() - t);
  }
  parentPort.postMessage({ type: "done", samples });
});
parentPort.postMessage({ type: "ready" });
