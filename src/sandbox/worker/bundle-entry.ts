/**
 * The pool's worker file when the CLI runs from its bundle (../../shared/bundle-runner.ts):
 * loads the worker's own bundle, dist/bundle/worker.cjs (./worker.ts and what it imports),
 * with its V8 code cache, and exports its task handler. scripts/bundle.mjs compiles this
 * file into dist/bundle/worker-entry.cjs, which piscina requires. In a training start
 * (workerData.trainCodeCache) the cache is rewritten after each task; a thread whose cache
 * V8 refused writes one for the process's V8 flags (workerData.codeCacheFlavour) a while
 * after it started, as the main thread does.
 */
import { workerData } from "node:worker_threads";
import { runBundle } from "../../shared/bundle-runner.js";

type Handler = (task: unknown) => Promise<unknown>;

const data = workerData as { trainCodeCache?: boolean; codeCacheFlavour?: string; codeCacheRefreshMs?: number };
const bundle = runBundle("worker", new URL("./worker.js", import.meta.url), data.codeCacheFlavour ?? "");
if (typeof bundle === "string") throw new Error(`the worker bundle is ${bundle}: run npm run build`);
const run = bundle.exports.default as Handler;

const training = data.trainCodeCache === true;
// A cache V8 refused (other V8 flags) or none: write one for these flags once the thread has run a while.
if (!training && bundle.codeCache !== "used" && data.codeCacheRefreshMs !== undefined) setTimeout(() => bundle.refresh(), data.codeCacheRefreshMs).unref();

export default training
  ? async (task: unknown) => {
      try {
        return await run(task);
      } finally {
        bundle.writeCache();
      }
    }
  : run;
