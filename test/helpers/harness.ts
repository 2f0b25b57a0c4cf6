/**
 * Starts the real product for tests: `codemode start` (or the two processes apart) as
 * child processes on 127.0.0.1 port 0, parses their ready lines, hands out typed gRPC
 * clients, and stops them with SIGTERM, checking they exit 0.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { cpSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox, type ExecEvent, type ExecRequest } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import type { Result } from "../../src/gen/codemode/common/v1/common_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ExecRequestSchema } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { until } from "./until.js";

export const BIN = fileURLToPath(new URL("../../bin/codemode.js", import.meta.url));

export type Proc = { child: ChildProcess; ready: Record<string, string>; stderr: string[]; stop(): Promise<number | null> };

/** `codemode <args>` on 127.0.0.1, resolved at its ready line; `bin` another build's entry (a copy of the package). */
export async function spawnCodemode(args: string[], env: Record<string, string> = {}, bin = BIN): Promise<Proc> {
  // Every orchestrator replays each code-mode run that finishes (docs/replay.md): stop() fails on a divergence.
  const child = spawn(process.execPath, [bin, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, CODEMODE_LOG_LEVEL: "info", CODEMODE_REPLAY_CHECK: "1", ...env },
  });
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on("line", (l) => stderr.push(l));
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<Record<string, string>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line from codemode ${args.join(" ")}\n${stderr.join("\n")}`)), 30_000);
    lines.on("line", (line) => {
      if (!line.startsWith("ready ")) return;
      clearTimeout(timer);
      resolve(
        Object.fromEntries(
          line
            .slice(6)
            .split(" ")
            .map((kv) => kv.split("=") as [string, string]),
        ),
      );
    });
    child.once("exit", (code) => reject(new Error(`codemode ${args.join(" ")} exited ${code}\n${stderr.join("\n")}`)));
  });
  return {
    child,
    ready,
    stderr,
    async stop() {
      let code = child.exitCode;
      if (code === null) {
        child.kill("SIGTERM");
        [code] = (await once(child, "exit")) as [number | null];
      }
      const checks = stderr.filter((l) => l.includes('"msg":"replay check'));
      // REPLAY_CHECK_TALLY=FILE keeps every verdict, to count what the suite replayed.
      if (process.env.REPLAY_CHECK_TALLY && checks.length > 0) appendFileSync(process.env.REPLAY_CHECK_TALLY, `${checks.join("\n")}\n`);
      const diverged = checks.filter((l) => l.includes('"verdict":"diverged"'));
      if (diverged.length > 0) throw new Error(`a recorded run replayed differently (CODEMODE_REPLAY_CHECK):\n${diverged.join("\n")}`);
      return code;
    },
  };
}

/**
 * Resolves once a line of `proc`'s stderr matches `pattern` (only lines from index `from`
 * on, when given: what the process logged after a point the test noted with
 * `proc.stderr.length`). Log lines travel through a pipe (and pino writes asynchronously),
 * so a line the process wrote before answering an RPC can reach the test after the answer:
 * assert on logs with this, never on a one-off read.
 */
export async function logged(proc: Proc, pattern: RegExp, options: number | { ms?: number; from?: number } = {}): Promise<string> {
  const { ms = 10_000, from = 0 } = typeof options === "number" ? { ms: options } : options;
  return until(() => proc.stderr.slice(from).find((l) => pattern.test(l)), `a log line matching ${pattern}`, {
    ms,
    everyMs: 20,
    detail: () => `stderr:\n${proc.stderr.slice(from).join("\n")}`,
  });
}

/** The index in `proc`'s stderr of the first line from `from` on that matches `pattern` (-1 when none yet): for orderings of events. */
export function lineIndex(proc: Proc, pattern: RegExp, from = 0): number {
  const i = proc.stderr.slice(from).findIndex((l) => pattern.test(l));
  return i < 0 ? -1 : i + from;
}

export type Stack = {
  proc: Proc;
  sandboxAddress: string;
  orchestratorAddress: string;
  sandbox: ServiceClient<typeof Sandbox.method>;
  control: ServiceClient<typeof Control.method>;
  stop(): Promise<number | null>;
};

/** `codemode start` on free ports, with clients; `bin` and `env` start another copy of the package, or with another environment. */
export async function startStack(extra: string[] = [], options: { bin?: string; env?: Record<string, string> } = {}): Promise<Stack> {
  const proc = await spawnCodemode(
    ["start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", ...extra],
    options.env ?? {},
    options.bin ?? BIN,
  );
  const sandboxAddress = proc.ready.sandbox!;
  const orchestratorAddress = proc.ready.orchestrator!;
  const sandbox = createClient(Sandbox, sandboxAddress);
  const control = createClient(Control, orchestratorAddress);
  return {
    proc,
    sandboxAddress,
    orchestratorAddress,
    sandbox,
    control,
    async stop() {
      sandbox.close();
      control.close();
      return proc.stop();
    },
  };
}

let seq = 0;
export function scope(prefix = "t") {
  seq++;
  return { agentId: `${prefix}-agent`, sessionId: `${prefix}-session-${seq}`, sessionKey: `${prefix}-key`, agentRunId: `${prefix}-run-${seq}-${Date.now()}` };
}

export type Model = {
  status: string;
  value?: unknown;
  error?: string;
  code?: string;
  output?: unknown[];
  telemetry: Record<string, unknown>;
  runId?: string;
  reason?: string;
  pendingToolCalls?: unknown[];
};

export type ExecOutcome = { result: Result; model: Model; events: ExecEvent[] };

export type ToolCallEvent = Extract<ExecEvent["event"], { case: "toolCall" }>["value"];

/** Reads an exec or wait stream to its Result; `onEvent` sees each event as it arrives. */
export async function collectStream(
  stream: AsyncIterable<ExecEvent>,
  onToolCall?: (call: ToolCallEvent) => void,
  onEvent?: (event: ExecEvent) => void,
): Promise<ExecOutcome> {
  const events: ExecEvent[] = [];
  let result: Result | undefined;
  for await (const ev of stream) {
    events.push(ev);
    onEvent?.(ev);
    if (ev.event.case === "toolCall") onToolCall?.(ev.event.value);
    if (ev.event.case === "result") result = ev.event.value;
  }
  if (!result) throw new Error("no result");
  return { result, model: JSON.parse(result.modelJson) as Model, events };
}

/** Opens a run with an empty catalog for a new scope (Exec and Wait need an open run). */
export async function openEmptyRun(control: ServiceClient<typeof Control.method>, prefix = "t"): Promise<ReturnType<typeof scope>> {
  const s = scope(prefix);
  await control.openRun({ scope: s, catalog: { case: "tools", value: { tools: [] } } });
  return s;
}

/**
 * Runs an exec to its end. `onToolCall` may answer nested calls (it gets the client).
 * Without a scope in `request`, a run with an empty catalog is opened for a new one first.
 */
export async function execute(
  stack: { sandbox: ServiceClient<typeof Sandbox.method>; control?: ServiceClient<typeof Control.method> },
  request: Partial<MessageInitShape<typeof ExecRequestSchema>>,
  onToolCall?: (call: ToolCallEvent) => void,
): Promise<ExecOutcome> {
  let runScope = request.scope;
  if (!runScope) {
    if (!stack.control) throw new Error("execute without a scope needs stack.control to open a run");
    runScope = await openEmptyRun(stack.control);
  }
  return collectStream(stack.sandbox.exec({ ...request, scope: runScope } as MessageInitShape<typeof ExecRequestSchema>), onToolCall);
}

/**
 * Starts an exec whose program writes output before it computes or waits: `running`
 * resolves at its first Output event (its VM got a thread and ran), and rejects if the
 * exec ends first; `done` settles with the outcome, or the stream's error (a cancelled
 * exec's: catch it). The event, not a sleep, tells a test the program is under way.
 */
export function startExec(
  sandbox: ServiceClient<typeof Sandbox.method>,
  request: MessageInitShape<typeof ExecRequestSchema>,
  options: { signal?: AbortSignal; onToolCall?: (call: ToolCallEvent) => void } = {},
): { running: Promise<void>; done: Promise<ExecOutcome> } {
  let ran!: () => void;
  const output = new Promise<void>((r) => (ran = r));
  const done = collectStream(sandbox.exec(request, options.signal ? { signal: options.signal } : {}), options.onToolCall, (ev) => {
    if (ev.event.case === "output") ran();
  });
  const endedFirst = done.then((o) => {
    throw new Error(`the exec ended before it wrote output: ${JSON.stringify(o.model)}`);
  });
  return { running: Promise.race([output, endedFirst]), done };
}

/** Runs a wait to its end. */
export async function waitFor(
  sandbox: ServiceClient<typeof Sandbox.method>,
  request: { scope: ReturnType<typeof scope>; runId: string; signal?: AbortSignal },
  onToolCall?: (call: ToolCallEvent) => void,
): Promise<ExecOutcome> {
  const { signal, runId, scope: s } = request;
  return collectStream(sandbox.wait({ scope: s, codeModeRunId: runId, waitCallId: `wait-${Date.now()}` }, signal ? { signal } : {}), onToolCall);
}

/** One snapshot key for every sidecar of a cluster, so any of them can resume any run. */
export const SHARED_SNAPSHOT_KEY = "test-snapshot-key-0123456789abcdef0123456789";

export type Cluster = {
  orchestrator: Proc;
  orchestratorAddress: string;
  /** The orchestrator's SidecarLink port (what a sidecar's --orchestrator-address names). */
  linkAddress: string;
  sidecars: Array<{ proc: Proc; address: string; sandbox: ServiceClient<typeof Sandbox.method> }>;
  control: ServiceClient<typeof Control.method>;
  /** Stops the orchestrator and starts it again on the same address with the same flags. */
  restartOrchestrator(): Promise<void>;
  stop(): Promise<Array<number | null>>;
};

/** An orchestrator and `sidecars` sandbox processes attached to it, each its own process. */
export async function startCluster(options: { sidecars: number; orchestratorArgs?: string[]; sidecarEnv?: Array<Record<string, string>> }): Promise<Cluster> {
  const orchArgs = options.orchestratorArgs ?? [];
  let orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0", ...orchArgs]);
  const orchestratorAddress = orchestrator.ready.orchestrator!;
  const linkAddress = orchestrator.ready.link!;
  const sidecars: Cluster["sidecars"] = [];
  for (let i = 0; i < options.sidecars; i++) {
    const env = { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY, ...(options.sidecarEnv?.[i] ?? {}) };
    const proc = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", linkAddress, "--threads", "1"], env);
    const address = proc.ready.sandbox!;
    sidecars.push({ proc, address, sandbox: createClient(Sandbox, address) });
  }
  const control = createClient(Control, orchestratorAddress);
  return {
    get orchestrator() {
      return orchestrator;
    },
    orchestratorAddress,
    linkAddress,
    sidecars,
    control,
    async restartOrchestrator() {
      const code = await orchestrator.stop();
      if (code !== 0) throw new Error(`orchestrator exited ${code}`);
      orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", orchestratorAddress, "--link-address", linkAddress, ...orchArgs]);
    },
    async stop() {
      control.close();
      const codes = [];
      for (const s of sidecars) {
        s.sandbox.close();
        codes.push(await s.proc.stop());
      }
      codes.push(await orchestrator.stop());
      return codes;
    },
  };
}

export type { ExecRequest };

/**
 * A runnable copy of the package (dist, bin, package.json; node_modules symlinked) in a temp
 * directory, which a test may break or change. `keepTimes` keeps dist's timestamps (a copy's
 * bundles then stay newer than its modules, so the copy runs from them).
 */
export function copyPackage(prefix: string, options: { keepTimes?: boolean } = {}): string {
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(join(root, "dist"), join(dir, "dist"), { recursive: true, preserveTimestamps: options.keepTimes === true });
  cpSync(join(root, "bin"), join(dir, "bin"), { recursive: true });
  cpSync(join(root, "package.json"), join(dir, "package.json"));
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}
