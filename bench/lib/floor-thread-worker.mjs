// The thread of ./floor-thread.mjs: loads the precompiled module once, then runs one floor
// VM per "run" message (JavaScript or a TypeScript cell; optionally with an interrupt
// handler checking a deadline on every poll, as the service's timeout does) and posts its time.
import { parentPort } from "node:worker_threads";
import { loadWasm, runFloor, runFloorTs } from "./floor.mjs";

const wasm = await loadWasm();
parentPort.on("message", async (m) => {
  if (m.type !== "run") return;
  try {
    const deadline = m.interruptMs === undefined ? undefined : Date.now() + m.interruptMs;
    const options = deadline === undefined ? {} : { interruptHandler: () => Date.now() > deadline };
    const t = performance.now();
    const value = m.typescript ? await runFloorTs(wasm, m.code) : await runFloor(wasm, m.code, options);
    parentPort.postMessage({ type: "ran", ms: performance.now() - t, value });
  } catch (err) {
    parentPort.postMessage({ type: "ran", error: String(err?.stack ?? err) });
  }
});
parentPort.postMessage({ type: "ready" });
