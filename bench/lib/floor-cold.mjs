// The cold-start floor, run as its own process by bench/exec-latency.bench.mjs: load
// quickjs-wasi and compile its WebAssembly module, print "ready", then run the first W1
// floor VM and print "result <value>". The parent times both lines as it times the sidecar's.
import { loadWasm, runFloor } from "./floor.mjs";
import { W1 } from "./workloads.mjs";

const wasm = await loadWasm();
process.stdout.write("ready\n");
const value = await runFloor(wasm, W1);
process.stdout.write(`result ${value}\n`);
