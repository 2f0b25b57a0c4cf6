/**
 * The pool's worker file when the CLI runs from its bundle (../../shared/bundle-runner.ts):
 * loads the worker's own bundle, dist/bundle/worker.cjs (./worker.ts and what it imports),
 * with its V8 code cache, and exports its task handler. scripts/bundle.mjs compiles this
 * file into dist/bundle/worker-entry.cjs, which piscina requires. In a training start
 * (workerData.trainCodeCache) the cache is rewritten after each task.
 */
import { workerData } from "node:worker_threads";
import { runBundle } from "../../shared/bundle-runner.js";

type Handler = (task: unknown) => Promise<unknown>;

const bundle = runBundle("worker", new URL("./worker.js", import.meta.url));
if (typeof bundle === "string") throw new Error(`the worker bundle is ${bundle}: run npm run build`);
const run = bundle.exports["default"] as Handler;

const training = (workerData as { trainCodeCache?: boolean }).trainCodeCache === true;

export default training
  ? async (task: unknown) => {
      try {
        return await run(task);
      } finally {
        bundle.writeCache();
      }
    }
  : run;
