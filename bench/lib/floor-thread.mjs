// The latency floor on a thread of its own, for bench/exec-latency.bench.mjs.
//
// The floor's samples alternate with the service's. Run in the bench's main thread, each
// floor VM left its garbage (a WebAssembly memory of megabytes per run) in the heap the
// gateway's code runs in, and V8 collected it during the *service's* next sample: W5 through
// the service measured 24 ms alternating with floor runs against 17 ms alone, and 17.7 ms
// when a forced collection after each floor run (untimed) took that garbage out of the
// service's samples; 12 ms of busy-waiting in place of the floor run cost nothing. On its
// own thread the floor runs in the same process, from the same precompiled module, timed
// around the same `runFloor` call, and its garbage is collected on its own heap, in its
// own samples.
//
// `startFloorThread()` resolves once the thread has loaded the module; `run(code, expect,
// { interruptMs, typescript })` runs one fresh VM there and resolves to its time in ms (the
// message to the thread and back is not timed).
import { Worker } from "node:worker_threads";

export async function startFloorThread() {
  const worker = new Worker(new URL("./floor-thread-worker.mjs", import.meta.url));
  await new Promise((resolve, reject) => {
    worker.once("error", reject);
    worker.once("message", (m) => (m.type === "ready" ? resolve() : reject(new Error(String(m)))));
  });
  let failed;
  worker.on("error", (err) => (failed = err));
  return {
    run(code, expect, options = {}) {
      if (failed) return Promise.reject(failed);
      return new Promise((resolve, reject) => {
        worker.once("message", (m) => {
          if (m.type !== "ran") return reject(new Error(`floor thread: unexpected message ${JSON.stringify(m)}`));
          if (m.error) return reject(new Error(m.error));
          if (m.value !== expect) return reject(new Error(`floor gave ${m.value}, expected ${expect}`));
          resolve(m.ms);
        });
        worker.postMessage({ type: "run", code, ...options });
      });
    },
    close: () => worker.terminate(),
  };
}
