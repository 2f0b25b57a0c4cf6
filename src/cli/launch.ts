/**
 * bin/codemode.js's first step: run the CLI from its bundle with the V8 code cache
 * (../shared/bundle-runner.ts says why), or report that the caller must import
 * ./main.js. With CODEMODE_CODE_CACHE_TRAINING=1 (scripts/bundle.mjs's training start)
 * the cache of everything compiled is written as the process exits. A server whose cache V8
 * refused or that had none writes one for its own V8 flags a while after its start
 * (./serve.ts).
 */
import { codeCacheFlavour, runBundle } from "../shared/bundle-runner.js";
import { setLaunchState, type LaunchState } from "../shared/launch-state.js";
import { applyProcessV8Flags } from "./v8-flags.js";

/** Runs the CLI from the bundle and returns true, or returns false (the caller imports dist/cli/main.js). */
export function launch(): boolean {
  // Before any code cache is read or written (./v8-flags.ts says why), bundle or not.
  applyProcessV8Flags();
  // Complete before the bundle's code runs, which reads it as it starts (the pool picks its worker file by it).
  const flavour = codeCacheFlavour();
  const state: LaunchState = { bundle: "used", codeCache: "none", training: process.env.CODEMODE_CODE_CACHE_TRAINING === "1", flavour };
  setLaunchState(state);
  if (process.env.CODEMODE_BUNDLE === "0") {
    state.bundle = "off";
    return false;
  }
  const bundle = runBundle("codemode", new URL("./main.js", import.meta.url), flavour);
  if (typeof bundle === "string") {
    state.bundle = bundle;
    return false;
  }
  state.codeCache = bundle.codeCache;
  if (state.training) process.on("exit", () => bundle.writeCache());
  else if (bundle.codeCache !== "used") state.refreshCodeCache = () => bundle.refresh();
  return true;
}
