/**
 * The search-index worker thread: builds a catalog version's tool-search index
 * (`buildIndex`) away from the sidecar's main thread, so execs running meanwhile never
 * stall behind it. One small dedicated thread per sidecar (never a QuickJS lane of the
 * pool), started by ./index-builder.ts at the first build. Each request `{ id, docs }`
 * arrives on parentPort; the index goes back as plain data (./search/index-wire.ts, typed
 * arrays transferred) on the `results` port given in workerData, followed by a small
 * `{ id }` on parentPort, so the main thread can take the result with
 * `receiveMessageOnPort` and time exactly what it costs there.
 */
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { buildIndex } from "./search/index-build.js";
import { toWire } from "./search/index-wire.js";
import { DEFAULT_TUNING, type SearchDoc } from "./search/tool-search-index.js";

export type IndexRequest = { id: number; docs: SearchDoc[] };
export type IndexResult = { id: number; ok: true; wire: ReturnType<typeof toWire>["wire"]; buildMs: number } | { id: number; ok: false; error: string };

const results = (workerData as { results?: MessagePort } | undefined)?.results;
if (!parentPort || !results) throw new Error("search-index-worker runs as a worker thread with a results port");
const control = parentPort;

control.on("message", (req: IndexRequest) => {
  let out: IndexResult;
  let transfer: ArrayBuffer[] = [];
  try {
    const t0 = performance.now();
    const data = buildIndex(req.docs, DEFAULT_TUNING);
    const buildMs = performance.now() - t0;
    const w = toWire(data);
    transfer = w.transfer;
    out = { id: req.id, ok: true, wire: w.wire, buildMs };
  } catch (err) {
    out = { id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  results.postMessage(out, transfer);
  control.postMessage({ id: req.id });
});
