// The throughput floor's threads, for bench/exec-latency.bench.mjs and bench/throughput.bench.mjs:
// `startFloorThreads(n)` starts n floor workers (./floor-worker.mjs) and resolves once each
// warmed up; `run(runsEach)` has each run that many W1 VMs back to back at once and resolves
// with the per-run latencies of all of them and the wall time (ms) from the start signal to
// the last run's end.
import { Worker } from "node:worker_threads";

export async function startFloorThreads(n) {
  const workers = await Promise.all(
    Array.from({ length: n }, () => {
      const w = new Worker(new URL("./floor-worker.mjs", import.meta.url));
      return new Promise((resolve, reject) => {
        w.once("error", reject);
        w.once("message", (m) => (m.type === "ready" ? resolve(w) : reject(new Error(String(m)))));
      });
    }),
  );
  return {
    async run(runsEach) {
      const t0 = performance.now();
      const results = await Promise.all(
        workers.map(
          (w) =>
            new Promise((resolve, reject) => {
              w.once("error", reject);
              w.once("message", (m) => resolve(m.samples));
              w.postMessage({ type: "go", runs: runsEach });
            }),
        ),
      );
      return { samples: results.flat(), wallMs: performance.now() - t0 };
    },
    close: () => Promise.all(workers.map((w) => w.terminate())),
  };
}
