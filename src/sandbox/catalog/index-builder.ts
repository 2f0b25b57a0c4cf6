/**
 * Builds catalog versions' search indexes on one small dedicated worker thread
 * (./search-index-worker.ts), so an index build for a large catalog never stalls the
 * execs this sidecar's main thread is serving. The worker starts at the first build of a
 * catalog larger than SMALL_CATALOG_DOCS (tiny ones are indexed in place) and is reused;
 * it is unref'd (never keeps the process alive). The index comes back as plain data
 * (./search/index-wire.ts, typed arrays transferred), taken with `receiveMessageOnPort`
 * so the main thread's whole share (sending the docs, receiving and rebuilding the index)
 * is timed. If the worker cannot start, fails or stalls, this and every later build runs
 * on the main thread instead, logged once.
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { fromWire } from "./search/index-wire.js";
import { ToolSearchIndex, type SearchDoc } from "./search/tool-search-index.js";
import type { Logger } from "../../shared/logger.js";
import type { IndexRequest, IndexResult } from "./search-index-worker.js";

export type BuiltIndex = {
  index: ToolSearchIndex;
  /** Milliseconds the build itself took, on whichever thread ran it. */
  buildMs: number;
  thread: "worker" | "main";
  /** Milliseconds of the main thread this build cost (sending, receiving and rebuilding; or the whole build). */
  mainThreadMs: number;
};

const WORKER_FILE = new URL("./search-index-worker.js", import.meta.url);
/**
 * Catalogs this small are indexed on the main thread (under about 1 ms): starting the
 * index thread for them costs about 110 ms of CPU, which a sidecar's first exec competed
 * with (measured: first exec after start 60 -> 48 ms under load).
 */
export const SMALL_CATALOG_DOCS = 16;
/** A build this late means a stuck worker: give up on it and build on the main thread. */
const STALL_MS = 30_000;

type Waiting = { docs: SearchDoc[]; mainMs: number; resolve: (r: BuiltIndex) => void; reject: (err: unknown) => void; timer: NodeJS.Timeout };

export class SearchIndexBuilder {
  private worker: Worker | undefined;
  private results: MessagePort | undefined;
  /** Why builds run on the main thread (set once, never cleared). */
  private disabled: string | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private log: Logger | undefined;

  constructor(private readonly workerFile: URL | string = WORKER_FILE) {}

  /** Whether builds go to the worker thread (false once it could not start or failed). */
  get offMainThread(): boolean {
    return this.disabled === undefined;
  }

  /** The index of `docs`, built on the worker if it can be; rejects only if the build itself throws. */
  build(docs: SearchDoc[], log?: Logger): Promise<BuiltIndex> {
    this.log ??= log;
    const t0 = performance.now();
    if (docs.length <= SMALL_CATALOG_DOCS) return settle(() => onMain(docs));
    const worker = this.start();
    if (!worker) return settle(() => onMain(docs));
    const id = this.nextId++;
    return new Promise<BuiltIndex>((resolve, reject) => {
      try {
        worker.postMessage({ id, docs } satisfies IndexRequest);
      } catch (err) {
        // A doc that cannot be cloned (not expected: strings only) is built here; the worker stays.
        this.log?.warn({ err }, "search index: could not send the catalog to the worker thread; building on the main thread");
        settle(() => onMain(docs)).then(resolve, reject);
        return;
      }
      const timer = setTimeout(() => this.fail(`the worker thread did not answer within ${STALL_MS} ms`), STALL_MS);
      timer.unref();
      this.waiting.set(id, { docs, mainMs: performance.now() - t0, resolve, reject, timer });
    });
  }

  /** Stops the worker thread (tests; a sidecar just exits, the thread is unref'd). */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    this.results?.close();
    if (w) await w.terminate();
  }

  private start(): Worker | undefined {
    if (this.disabled !== undefined) return undefined;
    if (this.worker) return this.worker;
    try {
      const { port1, port2 } = new MessageChannel();
      const worker = new Worker(this.workerFile, { workerData: { results: port1 }, transferList: [port1], resourceLimits: { maxOldGenerationSizeMb: 512 } });
      worker.unref();
      port2.unref();
      worker.on("message", (m: { id: number }) => this.receive(m.id));
      worker.on("error", (err) => this.fail(err));
      worker.on("exit", (code) => {
        if (this.worker === worker) this.fail(`the worker thread exited (code ${code})`);
      });
      this.worker = worker;
      this.results = port2;
      return worker;
    } catch (err) {
      this.fail(err);
      return undefined;
    }
  }

  private receive(id: number): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    clearTimeout(w.timer);
    const t1 = performance.now();
    const r = this.results ? (receiveMessageOnPort(this.results)?.message as IndexResult | undefined) : undefined;
    if (!r || r.id !== id || !r.ok) {
      // Out of step, or the build threw there: build this one here (it throws here too if the catalog makes it throw).
      this.log?.warn({ error: r && !r.ok ? r.error : "no result" }, "search index: the worker thread did not build it; building on the main thread");
      settle(() => onMain(w.docs)).then(w.resolve, w.reject);
      return;
    }
    const index = ToolSearchIndex.fromData(fromWire(r.wire));
    w.resolve({ index, buildMs: r.buildMs, thread: "worker", mainThreadMs: w.mainMs + (performance.now() - t1) });
  }

  /** The worker is unusable: every build, waiting or later, runs on the main thread. Logged once. */
  private fail(err: unknown): void {
    if (this.disabled === undefined) {
      this.disabled = err instanceof Error ? err.message : String(err);
      this.log?.warn({ err }, "search index worker thread unavailable; building search indexes on the main thread");
    }
    const w = this.worker;
    this.worker = undefined;
    this.results?.close();
    this.results = undefined;
    if (w) void w.terminate().catch(() => undefined);
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const x of waiting) {
      clearTimeout(x.timer);
      settle(() => onMain(x.docs)).then(x.resolve, x.reject);
    }
  }
}

function onMain(docs: readonly SearchDoc[]): BuiltIndex {
  const t0 = performance.now();
  const index = new ToolSearchIndex(docs);
  const ms = performance.now() - t0;
  return { index, buildMs: ms, thread: "main", mainThreadMs: ms };
}

function settle<T>(f: () => T): Promise<T> {
  try {
    return Promise.resolve(f());
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The sidecar's one builder (one worker thread per process, started at the first build). */
export const sharedIndexBuilder = new SearchIndexBuilder();
