// Drives the plain gateways of bench/exec-latency.bench.mjs (issue 34), each a process of its
// own: bench/lib/plain-gateway.mjs (Node, grpc-js and the generated descriptors) and
// bench/lib/python_gateway.py (Debian's python3, grpcio and generate.sh's stubs). Both read
// `run W2 ExecSession 1` on stdin and answer one JSON line, {"samples": [...]} or {"error"};
// the child times each exec itself, so the line's round trip is not in a sample.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const live = new Set();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

async function startChild(command, args, name) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
  live.add(child);
  const stderr = [];
  createInterface({ input: child.stderr }).on("line", (l) => stderr.push(l));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const next = async () => {
    const r = await Promise.race([lines.next(), exited.then(() => ({ done: true }))]);
    if (r.done) throw new Error(`${name} exited: ${stderr.slice(-5).join("\n")}`);
    return r.value;
  };
  const first = await next();
  if (first !== "ready") throw new Error(`${name}: expected ready, got ${first}\n${stderr.join("\n")}`);
  return {
    /** Runs `count` execs of `workload` answered `way` (on the run with 2,000 tools with `big`); resolves to their latencies in ms. */
    async run(workload, way, count = 1, catalog = "") {
      child.stdin.write(`run ${workload} ${way} ${count}${catalog ? ` ${catalog}` : ""}\n`);
      const reply = JSON.parse(await next());
      if (reply.error) throw new Error(`${name}: ${reply.error}`);
      return reply.samples;
    },
    /** One exec, for `interleave`: resolves to its latency in ms. */
    sample(workload, way, catalog = "") {
      return this.run(workload, way, 1, catalog).then((s) => s[0]);
    },
    async close() {
      child.stdin.end("quit\n");
      await exited;
      live.delete(child);
    },
  };
}

/** The Node plain gateway, connected to a sidecar's ready addresses. */
export function startPlainGateway(ready) {
  return startChild(process.execPath, [here("./plain-gateway.mjs"), ready.sandbox, ready.orchestrator], "plain gateway");
}

/**
 * The Python gateway. Uses clients/python/codemode_client/_gen when generate.sh has made it,
 * else runs generate.sh into a temporary directory (removed on close).
 */
export async function startPythonGateway(ready) {
  let stubs = here("../../clients/python/codemode_client/_gen");
  let temp;
  if (!existsSync(join(stubs, "codemode", "sandbox", "v1", "sandbox_pb2_grpc.py"))) {
    temp = mkdtempSync(join(tmpdir(), "codemode-bench-py-"));
    stubs = join(temp, "gen");
    execFileSync("bash", [here("../../clients/python/generate.sh"), stubs], { stdio: ["ignore", "ignore", "inherit"] });
  }
  const gw = await startChild("/usr/bin/python3", [here("./python_gateway.py"), stubs, ready.sandbox, ready.orchestrator], "python gateway");
  const close = gw.close.bind(gw);
  gw.close = async () => {
    await close();
    if (temp) rmSync(temp, { recursive: true, force: true });
  };
  return gw;
}
