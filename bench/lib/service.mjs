// The service side of bench/exec-latency.bench.mjs: starts `codemode start` as a child
// process (port 0, ready line on stdout, as test/harness.ts does) and plays the gateway:
// OpenRun, Exec and Wait streams, and a BridgeCallback per nested tool call, answered at once.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createClient } from "../../dist/protocol/grpc-client.js";
import { Sandbox } from "../../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { answer } from "./workloads.mjs";

const BIN = fileURLToPath(new URL("../../bin/codemode.js", import.meta.url));
/**
 * The C allocator's settings the service runs with, as `npm start` and the Dockerfile set
 * them (docs/operations.md, "Memory"), unless this process's environment sets them.
 */
export const MALLOC_DEFAULTS = { MALLOC_ARENA_MAX: "2", MALLOC_MMAP_THRESHOLD_: "131072" };
/** Those settings as the service gets them, for a bench's header line. */
export function mallocSettings() {
  const env = { ...MALLOC_DEFAULTS, ...process.env };
  return `MALLOC_ARENA_MAX=${env.MALLOC_ARENA_MAX} MALLOC_MMAP_THRESHOLD_=${env.MALLOC_MMAP_THRESHOLD_}`;
}
/** A fixed key, so the run is what a multi-replica deployment runs (sealed snapshots, any replica resumes). */
const SNAPSHOT_KEY = "bench-snapshot-key-0123456789abcdef0123456789";
const live = new Set();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/**
 * Spawns `node bin/codemode.js start` and resolves at its ready line, with the spawn and
 * ready times (performance.now()). stderr (log level warn) is kept for the report.
 */
export async function startService(extraArgs = []) {
  const spawnedAt = performance.now();
  // CODEMODE_BENCH_SIDECAR_NODE_ARGS: node flags for the service alone (e.g. --cpu-prof).
  const nodeArgs = (process.env.CODEMODE_BENCH_SIDECAR_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(
    process.execPath,
    [...nodeArgs, BIN, "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", ...extraArgs],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...MALLOC_DEFAULTS, ...process.env, CODEMODE_LOG_LEVEL: "warn", CODEMODE_SNAPSHOT_KEY: SNAPSHOT_KEY },
    },
  );
  live.add(child);
  const stderr = [];
  createInterface({ input: child.stderr }).on("line", (l) => stderr.push(l));
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line within 30 s\n${stderr.join("\n")}`)), 30_000);
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (!line.startsWith("ready ")) return;
      clearTimeout(timer);
      resolve(
        Object.fromEntries(
          line
            .slice(6)
            .split(" ")
            .map((kv) => kv.split("=")),
        ),
      );
    });
    child.once("exit", (code, signal) =>
      reject(new Error(`codemode start exited ${signal ? `on ${signal}` : code} before its ready line\n${stderr.join("\n")}`)),
    );
  });
  const readyAt = performance.now();
  return {
    child,
    ready,
    spawnedAt,
    readyAt,
    stderr,
    /** VmRSS and VmHWM (peak) of the process, in MiB. */
    memory() {
      const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
      const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
      return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await once(child, "exit");
      }
      live.delete(child);
      return child.exitCode;
    },
  };
}

let seq = 0;
const CONFIG = { maxToolCallsPerRun: 100_000, maxSearchesPerRun: 100_000 };

/** A gateway's view of one sidecar: its clients, and exec/wait helpers that time to the Result event. */
export class Gateway {
  constructor(ready) {
    this.sandbox = createClient(Sandbox, ready.sandbox);
    this.control = createClient(Control, ready.orchestrator);
    this.bridgeErrors = 0;
    this.firstBridgeError = undefined;
  }

  /** Opens a run on a new scope with an inline catalog; nested-call caps raised past the bench's count. */
  async openRun(catalog, prefix = "bench") {
    seq++;
    const scope = { agentId: `${prefix}-agent`, sessionId: `${prefix}-session-${seq}`, sessionKey: `${prefix}-key-${seq}`, agentRunId: `${prefix}-run-${seq}` };
    await this.control.openRun({ scope, catalog: { case: "tools", value: catalog }, config: CONFIG });
    return scope;
  }

  closeRun(scope) {
    return this.control.closeRun({ scope });
  }

  /** Reads an exec or wait stream; answers nested calls at once. Returns the Result and when it arrived. */
  async follow(scope, stream) {
    let result;
    let at;
    for await (const ev of stream) {
      if (ev.event.case === "toolCall") {
        const call = ev.event.value;
        this.sandbox
          .bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: answer(call.toolName, call.inputJson) } })
          .catch((err) => {
            this.bridgeErrors++;
            this.firstBridgeError ??= err.message;
          });
      } else if (ev.event.case === "result") {
        at = performance.now();
        result = ev.event.value;
      }
    }
    if (!result) throw new Error("stream ended without a Result");
    return { result, at };
  }

  /** Runs one exec; checks it completed with `expect`; resolves to its latency in ms (send to Result). */
  async exec(scope, code, expect, language) {
    const t = performance.now();
    const { result, at } = await this.follow(
      scope,
      this.sandbox.exec({ scope, code, ...(language ? { language } : {}) }, { signal: AbortSignal.timeout(60_000) }),
    );
    check(result, 1, expect);
    this.lastResultAt = at;
    return at - t;
  }

  /** Like exec, over ExecSession: nested calls are answered on the exec's own stream. */
  async execSession(scope, code, expect) {
    const t = performance.now();
    const s = this.sandbox.execSession({ signal: AbortSignal.timeout(60_000) });
    s.send({ message: { case: "exec", value: { scope, code } } });
    let result;
    let at;
    for await (const ev of s.messages) {
      if (ev.event.case === "toolCall") {
        const call = ev.event.value;
        s.send({ message: { case: "answer", value: { callId: call.callId, outcome: { case: "resultJson", value: answer(call.toolName, call.inputJson) } } } });
      } else if (ev.event.case === "answerRefused") {
        this.bridgeErrors++;
        this.firstBridgeError ??= ev.event.value.message;
      } else if (ev.event.case === "result") {
        at = performance.now();
        result = ev.event.value;
        s.end();
      }
    }
    if (!result) throw new Error("session ended without a Result");
    check(result, 1, expect);
    return at - t;
  }

  /** Exec of a yielding program then Wait on its run id; resolves to {ms, snapshotBytes}. */
  async suspendResume(scope, code, expect) {
    const t = performance.now();
    const first = await this.follow(scope, this.sandbox.exec({ scope, code }, { signal: AbortSignal.timeout(60_000) }));
    check(first.result, 2);
    const snapshotBytes = Number(first.result.telemetry?.snapshotBytes ?? NaN);
    const second = await this.follow(
      scope,
      this.sandbox.wait({ scope, codeModeRunId: first.result.codeModeRunId, waitCallId: `wait-${seq}` }, { signal: AbortSignal.timeout(60_000) }),
    );
    check(second.result, 1, expect);
    return { ms: second.at - t, snapshotBytes };
  }

  close() {
    this.sandbox.close();
    this.control.close();
  }
}

const STATUS = ["unspecified", "completed", "waiting", "failed"];
function check(result, status, expect) {
  if (result.status !== status) throw new Error(`expected ${STATUS[status]}, got ${STATUS[result.status] ?? result.status}: ${result.modelJson.slice(0, 300)}`);
  if (expect !== undefined) {
    const value = JSON.parse(result.valueJson);
    if (value !== expect) throw new Error(`expected value ${expect}, got ${result.valueJson.slice(0, 100)}`);
  }
}
