// The VM of bench/lib/shape-server.mjs: one QuickJS VM, made once from the compiled module
// and kept for every exec (no reset, no limits, no prelude beyond the bench's tools), running
// each program as an async function. A nested call is a guest promise the server settles:
// the call goes out through `post`, its answer comes back through the returned handler.
// Loaded as a worker thread, it serves its parent port; the server's --inline mode calls
// `shapeVm` on its own thread instead.
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { QuickJS } from "quickjs-wasi";

/** A VM for the shape's server; returns the handler of the server's messages (exec, answer). */
export async function shapeVm(wasm, post) {
  const vm = await QuickJS.create({ wasm });
  const pending = new Map();
  let execId = 0;
  let seq = 0;
  const call = vm.newFunction("__call", (nameH, inputH) => {
    const callId = `c${++seq}`;
    const deferred = vm.newPromise();
    pending.set(callId, deferred);
    post({ t: "call", exec: execId, callId, name: nameH.toString(), inputJson: inputH.toString() });
    return deferred.handle;
  });
  vm.setProp(vm.global, "__call", call);
  call.dispose();
  vm.evalCode(`globalThis.tools = {
  echo: async (input) => JSON.parse(await __call("echo", JSON.stringify(input))),
};`).dispose();

  /** Runs until the program's promise settles, then posts its value. */
  async function run(exec, code) {
    execId = exec;
    const promise = vm.evalCode(`(async () => {\n${code}\n})()`);
    vm.executePendingJobs();
    const settled = await vm.resolvePromise(promise);
    promise.dispose();
    if ("error" in settled) {
      const e = vm.dump(settled.error);
      settled.error.dispose();
      post({ t: "done", exec, error: JSON.stringify(e) });
      return;
    }
    const valueJson = JSON.stringify(vm.dump(settled.value));
    settled.value.dispose();
    post({ t: "done", exec, valueJson });
  }

  return (m) => {
    if (m.t === "exec") void run(m.exec, m.code);
    else if (m.t === "answer") {
      const deferred = pending.get(m.callId);
      if (!deferred) return;
      pending.delete(m.callId);
      const value = vm.newString(m.json);
      deferred.resolve(value);
      value.dispose();
      deferred.handle.dispose();
      vm.executePendingJobs();
    }
  };
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  const onMessage = await shapeVm(workerData.wasm, (m) => port.postMessage(m));
  port.on("message", onMessage);
  port.postMessage({ t: "ready" });
}
