// The worker thread of bench/lib/shape-server.mjs: one QuickJS VM, made once from the
// compiled module and kept for every exec (no reset, no limits, no prelude beyond the bench's
// tools), running each program as an async function. A nested call is a guest promise the
// main thread settles: the call goes out on this thread's port, its answer comes back on it.
import { parentPort, workerData } from "node:worker_threads";
import { QuickJS } from "quickjs-wasi";

const vm = await QuickJS.create({ wasm: workerData.wasm });
const pending = new Map();
let execId = 0;
let seq = 0;
const call = vm.newFunction("__call", (nameH, inputH) => {
  const callId = `c${++seq}`;
  const deferred = vm.newPromise();
  pending.set(callId, deferred);
  parentPort.postMessage({ t: "call", exec: execId, callId, name: nameH.toString(), inputJson: inputH.toString() });
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
    parentPort.postMessage({ t: "done", exec, error: JSON.stringify(e) });
    return;
  }
  const valueJson = JSON.stringify(vm.dump(settled.value));
  settled.value.dispose();
  parentPort.postMessage({ t: "done", exec, valueJson });
}

parentPort.on("message", (m) => {
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
});
parentPort.postMessage({ t: "ready" });
