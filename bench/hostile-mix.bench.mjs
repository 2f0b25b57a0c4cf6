// Tenant safety under load (issue 9): steady benign traffic at a fixed offered rate, first
// alone (baseline), then with 10% hostile programs of one category per phase (busy loop,
// native loop, memory growth, bridge flood, oversized input, cancel), then an RSS soak with
// every category mixed in. The sidecar (`codemode sandbox`) and the orchestrator run as two
// real processes on 127.0.0.1:0, so the RSS read from /proc/<pid>/status is the sidecar's
// alone; this process is the gateway: it opens runs, sends execs open-loop on a fixed
// schedule (a slow result never delays the next send), and answers nested tool calls with
// BridgeCallback after a few ms. Prints figures and the issue's targets with pass/fail
// words; asserts nothing.
//
// Usage: node bench/hostile-mix.bench.mjs [--seconds 60] [--minutes 10] [--rate 30]
//          [--only busy,native,...] [--threads N] [--sample-seconds 5] [--log-file PATH]
//   --seconds  length of each phase; --minutes  length of the soak (0 skips it; fractions ok)
//   --rate     benign execs per second (hostile phases add rate/9 hostile ones: 10% of traffic)
//   --log-file every stderr line of both processes, prefixed with the phase
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { createWriteStream, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { createClient } from "../dist/protocol/grpc-client.js";
import { Sandbox } from "../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { MALLOC_DEFAULTS, mallocSettings } from "./lib/service.mjs";

const CATEGORIES = ["busy", "native", "memory", "flood", "oversized", "cancel"];
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    minutes: { type: "string", default: "10" },
    rate: { type: "string", default: "30" },
    only: { type: "string", default: CATEGORIES.join(",") },
    threads: { type: "string" },
    "sample-seconds": { type: "string", default: "5" },
    "log-file": { type: "string" },
  },
});
const SECONDS = Number(values.seconds);
const MINUTES = Number(values.minutes);
const RATE = Number(values.rate);
const SAMPLE_MS = Number(values["sample-seconds"]) * 1000;
const ONLY = values.only.split(",").filter((c) => CATEGORIES.includes(c));
const TARGET = { success: 99.9, p99Ratio: 3, rssMiBPerMin: 1 };
const EXECS_PER_AGENT_RUN = 10;

// ---------------------------------------------------------------- processes
const BIN = new URL("../bin/codemode.js", import.meta.url).pathname;
const logs = { phase: "start-up", tally: new Map(), threads: undefined, file: values["log-file"] ? createWriteStream(values["log-file"]) : undefined };
function startProcess(args, env = {}) {
  // CODEMODE_BENCH_SIDECAR_NODE_ARGS: node flags for the sidecar alone (e.g. --cpu-prof).
  const nodeArgs = args[0] === "sandbox" ? (process.env.CODEMODE_BENCH_SIDECAR_NODE_ARGS ?? "").split(" ").filter(Boolean) : [];
  const child = spawn(process.execPath, [...nodeArgs, BIN, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...MALLOC_DEFAULTS, ...process.env, CODEMODE_LOG_LEVEL: "info", ...env },
  });
  const name = args[0];
  // Every log line but the per-exec "exec finished" is tallied per phase (the clues).
  createInterface({ input: child.stderr }).on("line", (line) => {
    logs.file?.write(`${logs.phase}\t${line}\n`);
    let rec;
    try {
      rec = JSON.parse(line);
    } catch {
      rec = { level: 50, msg: line.slice(0, 160) };
    }
    if (rec.msg === "sandbox listening") logs.threads = rec.threads;
    if (rec.msg === "exec finished") return;
    const level = rec.level >= 50 ? "error" : rec.level >= 40 ? "warn" : "info";
    const key = `${name} ${level}: ${rec.msg}`;
    const byPhase = logs.tally.get(logs.phase) ?? new Map();
    byPhase.set(key, (byPhase.get(key) ?? 0) + 1);
    logs.tally.set(logs.phase, byPhase);
  });
  const ready = new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on(
      "line",
      (l) =>
        l.startsWith("ready ") &&
        resolve(
          Object.fromEntries(
            l
              .slice(6)
              .split(" ")
              .map((kv) => kv.split("=")),
          ),
        ),
    );
    child.once("exit", (code) => reject(new Error(`codemode ${name} exited ${code}`)));
  });
  return { child, ready };
}
// Both processes share a random link token and snapshot key (two processes, one deployment).
const LINK_TOKEN = randomBytes(32).toString("base64url");
// The orchestrator serves SidecarLink on a port of its own (`--link-address`); a build
// without that flag serves it on the Control port.
let orchestrator = startProcess(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"], {
  CODEMODE_LINK_TOKEN: LINK_TOKEN,
});
let orchestratorReady = await orchestrator.ready.catch(() => undefined);
if (!orchestratorReady) {
  orchestrator = startProcess(["orchestrator", "--orchestrator-address", "127.0.0.1:0"], { CODEMODE_LINK_TOKEN: LINK_TOKEN });
  orchestratorReady = await orchestrator.ready;
}
const orchestratorAt = orchestratorReady.orchestrator;
const sidecar = startProcess(
  [
    "sandbox",
    "--sandbox-address",
    "127.0.0.1:0",
    "--metrics-address",
    "127.0.0.1:0",
    "--orchestrator-address",
    orchestratorReady.link ?? orchestratorAt,
    ...(values.threads ? ["--threads", values.threads] : []),
  ],
  { CODEMODE_SNAPSHOT_KEY: randomBytes(36).toString("base64"), CODEMODE_LINK_TOKEN: LINK_TOKEN },
);
const sidecarReady = await sidecar.ready;
const sandboxAt = sidecarReady.sandbox;
/**
 * From the sidecar's Prometheus endpoint: its queue of execs waiting for a worker, its
 * main thread's V8 heap (total and used, MiB) and its worker threads' memory (their V8
 * heaps, the memory outside them V8 is told of, and the QuickJS instances and images kept
 * for reuse), to tell what of RSS each holds (the rest is the C allocator's and code); and
 * its threads beyond --threads (surge and background).
 */
async function sidecarGauges() {
  try {
    const text = await (await fetch(`http://${sidecarReady.metrics}/metrics`)).text();
    const gauge = (name) => Number(text.match(new RegExp(`^${name} (\\S+)`, "m"))?.[1] ?? NaN);
    const worker = (part) => gauge(`codemode_worker_memory_bytes\\{part="${part}"\\}`) / 2 ** 20;
    return {
      queue: gauge("codemode_pool_queue_size"),
      heapTotal: gauge("codemode_nodejs_heap_size_total_bytes") / 2 ** 20,
      heapUsed: gauge("codemode_nodejs_heap_size_used_bytes") / 2 ** 20,
      surge: gauge("codemode_pool_surge_threads"),
      background: gauge("codemode_pool_background_threads"),
      workerHeap: worker("heap_total"),
      workerExternal: worker("external"),
      workerKept: worker("spares") + worker("images") + worker("compiler"),
    };
  } catch {
    return { queue: NaN, heapTotal: NaN, heapUsed: NaN, surge: NaN, background: NaN, workerHeap: NaN, workerExternal: NaN, workerKept: NaN };
  }
}
const sandbox = createClient(Sandbox, sandboxAt);
const control = createClient(Control, orchestratorAt);

const rssMiB = (pid) => {
  try {
    return Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) / 1024;
  } catch {
    return NaN;
  }
};

// ---------------------------------------------------------------- the gateway's catalog and runs
const TOOLS = [
  { name: "lookup", description: "Looks up an item by id.", parametersJson: JSON.stringify({ type: "object", properties: { id: { type: "number" } } }) },
  {
    name: "weather",
    description: "Current weather and forecast for a city.",
    parametersJson: JSON.stringify({ type: "object", properties: { city: { type: "string" } } }),
  },
  {
    name: "send_email",
    description: "Sends an email to a recipient.",
    parametersJson: JSON.stringify({ type: "object", properties: { to: { type: "string" }, body: { type: "string" } } }),
  },
  {
    name: "store_blob",
    description: "Stores a blob of text and returns its size.",
    parametersJson: JSON.stringify({ type: "object", properties: { blob: { type: "string" } } }),
  },
  {
    name: "fetch_blob",
    description: "Returns a large blob of text.",
    parametersJson: JSON.stringify({ type: "object", properties: { bytes: { type: "number" } } }),
  },
];
const { catalogId } = await control.putCatalog({ tools: TOOLS });
let runSeq = 0;
/**
 * Each benign conversation is a session of its own (a chat: one exec at a time); each
 * hostile category is one attacker's session, whose execs overlap. The sandbox's fair
 * share is per session (src/sandbox/pool/cpu-budget.ts).
 */
async function openScope(kind) {
  const n = ++runSeq;
  const session = kind === "benign" ? `benign-${n}` : kind;
  const scope = { agentId: "hostile-mix", sessionId: `s-${session}`, sessionKey: `k-${session}`, agentRunId: `${kind}-${n}` };
  await control.openRun({ scope, catalog: { case: "catalogId", value: catalogId } });
  return scope;
}
const closeScope = (scope) => control.closeRun({ scope }).catch(() => undefined);

/** BridgeCallback outcomes per phase: a lost answer shows here. */
const answers = new Map();
function tallyAnswer(key, sent) {
  const byPhase = answers.get(logs.phase) ?? new Map();
  const e = byPhase.get(key) ?? { n: 0, ms: [] };
  e.n++;
  e.ms.push(performance.now() - sent);
  byPhase.set(key, e);
  answers.set(logs.phase, byPhase);
}

/** What the gateway's tools answer (sent back as JSON text after the exec's answer delay). */
function answerFor(toolName, input) {
  switch (toolName) {
    case "lookup":
      return { id: input.id, name: `item${input.id}` };
    case "weather":
      return { city: input.city, tempC: 12, forecast: ["rain", "sun"] };
    case "store_blob":
      return { stored: typeof input.blob === "string" ? input.blob.length : 0 };
    case "fetch_blob":
      return { blob: "b".repeat(Math.min(Number(input.bytes) || 0, 3 * 1024 * 1024 - 64)) };
    default:
      return { ok: true };
  }
}

/**
 * One Exec over real gRPC. Nested calls are answered with BridgeCallback after
 * `answerDelay()` ms (false leaves them unanswered); `cancelAfterMs` makes the gateway
 * cancel the call mid-run.
 */
async function runExec(scope, code, config, { answerDelay = () => 2 + Math.random() * 6, cancelAfterMs } = {}) {
  const controller = new AbortController();
  const timers = [];
  if (cancelAfterMs !== undefined) timers.push(setTimeout(() => controller.abort(), cancelAfterMs));
  const t0 = performance.now();
  let model;
  try {
    for await (const ev of sandbox.exec({ scope, code, config }, { signal: controller.signal })) {
      if (ev.event.case === "toolCall") {
        const call = ev.event.value;
        const delay = answerDelay();
        if (delay === false) continue;
        let input = {};
        try {
          input = JSON.parse(call.inputJson);
        } catch {}
        const resultJson = JSON.stringify(answerFor(call.toolName, input));
        timers.push(
          setTimeout(() => {
            const sent = performance.now();
            void sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: resultJson } }).then(
              (res) => tallyAnswer(res.deliveredLive ? "delivered live" : "routed to the orchestrator (no live VM)", sent),
              (err) => tallyAnswer(`refused: ${err?.code ?? "error"} ${String(err?.message ?? "").slice(0, 80)}`, sent),
            );
          }, delay),
        );
      } else if (ev.event.case === "result") {
        model = JSON.parse(ev.event.value.modelJson);
      }
    }
  } catch (err) {
    for (const t of timers) clearTimeout(t);
    // grpc-js reports the gateway's own cancel as CANCELLED, which the client maps to "unavailable".
    return {
      ms: performance.now() - t0,
      outcome: controller.signal.aborted ? "cancelled by gateway" : `rpc ${err?.code ?? "error"}`,
      error: String(err?.message ?? err),
    };
  }
  for (const t of timers) clearTimeout(t);
  const ms = performance.now() - t0;
  if (!model) return { ms, outcome: "no result" };
  const error =
    model.status === "waiting"
      ? `${model.reason}, ${model.pendingToolCalls?.length ?? 0} pending: ${JSON.stringify(model.pendingToolCalls?.map((c) => c.name ?? c.toolName ?? c.id) ?? [])}`
      : model.error;
  return { ms, outcome: model.status === "failed" ? `failed/${model.code ?? "uncaught"}` : model.status, value: model.value, error };
}

// ---------------------------------------------------------------- benign programs
let loopExpect = 0;
for (let i = 0; i < 20000; i++) loopExpect = (loopExpect + i * i) % 1000003;
const BENIGN = [
  { code: `return { ok: true, items: [1, 2, 3].map((x) => x * 2), at: "x".padStart(3, "-") }`, expect: { ok: true, items: [2, 4, 6], at: "--x" } },
  { code: `const r = await tools.lookup({ id: 7 }); return r.name`, expect: "item7" },
  { code: `const [a, b] = await Promise.all([tools.lookup({ id: 1 }), tools.weather({ city: "Oslo" })]);\nreturn a.name + ":" + b.city`, expect: "item1:Oslo" },
  {
    code: `const hits = await tools.search("weather forecast", { limit: 3 });\nconst a = await tools.lookup({ id: 2 });\nconst w = await tools.weather({ city: a.name });\nconst e = await tools.send_email({ to: "ops@example.com", body: w.forecast.join(",") });\nreturn [hits[0].name, w.city, e.ok]`,
    expect: ["weather", "item2", true],
  },
  { code: `let s = 0;\nfor (let i = 0; i < 20000; i++) s = (s + i * i) % 1000003;\nreturn s`, expect: loopExpect },
  {
    code: `console.log("step", 1, { a: [1, 2] });\nconsole.warn("careful");\ntext("halfway");\nconst r = await tools.lookup({ id: 3 });\nconsole.info("got", r.name);\nreturn "done"`,
    expect: "done",
  },
];
const benignExpect = BENIGN.map((b) => JSON.stringify(b.expect));

/**
 * Agent runs as a gateway has them: a model waits for one exec's result before its next,
 * so an agent run has at most one exec in flight; a conversation makes
 * EXECS_PER_AGENT_RUN execs, then the gateway closes it. A send with no idle agent run
 * opens a new one (another conversation), so overload shows as more runs, not as more
 * execs per run.
 */
const idleRuns = [];
let benignSeq = 0;
async function benignExec() {
  const run = idleRuns.pop() ?? { scope: await openScope("benign"), uses: 0 };
  const i = benignSeq++ % BENIGN.length;
  const r = await runExec(run.scope, BENIGN[i].code, {});
  if (++run.uses >= EXECS_PER_AGENT_RUN) void closeScope(run.scope);
  else idleRuns.push(run);
  const ok = r.outcome === "completed" && JSON.stringify(r.value) === benignExpect[i];
  return { ...r, ok, outcome: ok ? "ok" : r.outcome === "completed" ? "completed, wrong value" : r.outcome };
}

// ---------------------------------------------------------------- hostile programs, one category per phase
const sparse = `const a = []; a.length = 2 ** 32 - 1; a[2 ** 32 - 2] = 1;`;
const HOSTILE = {
  busy: [{ code: `for (;;) {}`, config: { timeoutMs: 2000 } }],
  native: [{ code: `new Array(2 ** 32 - 1).join("")`, config: { timeoutMs: 2000 } }],
  memory: [
    { code: `const keep = [];\nfor (;;) keep.push(new Array(100000).fill(keep.length));`, config: { timeoutMs: 5000 } },
    // Doubling a string: QuickJS refuses it at its string length limit ("string too long").
    { code: `let s = "x";\nconst keep = [];\nfor (;;) { s = s + s; keep.push(s + "y"); }`, config: { timeoutMs: 5000 } },
  ],
  flood: [
    // Thousands of refused tool calls (unknown ids, then past maxToolCallsPerRun).
    {
      code: `let refused = 0;\nfor (let i = 0; i < 3000; i++) { try { await tools.call("openclaw:core:nope_" + i, {}); } catch { refused++; } }\nreturn refused`,
    },
    // Thousands of searches (past maxSearchesPerRun they are refused).
    {
      code: `let n = 0;\nfor (let i = 0; i < 3000; i++) { try { n += (await tools.search("weather " + i, { limit: 50 })).length; } catch { n--; } }\nreturn n`,
    },
    // A burst far past maxPendingToolCalls, and a huge sparse array as tool input and as the value.
    {
      code: `const burst = await Promise.allSettled(Array.from({ length: 5000 }, (_, i) => tools.lookup({ id: i })));\n${sparse}\nlet refused = burst.filter((r) => r.status === "rejected").length;\ntry { await tools.lookup({ id: 1, items: a }); } catch { refused++; }\nreturn a`,
    },
  ],
  oversized: [
    // A tool input just under the 3 MiB bridge limit, and one just over it.
    { code: `const r = await tools.store_blob({ blob: "x".repeat(3 * 1024 * 1024 - 1024) });\nreturn r.stored` },
    { code: `return await tools.store_blob({ blob: "x".repeat(3 * 1024 * 1024 + 16) })` },
    // A gateway answer near the limit, returned whole (past maxOutputBytes).
    { code: `const r = await tools.fetch_blob({ bytes: 3 * 1024 * 1024 - 4096 });\nreturn r.blob` },
    // Output and value near and past the 64 KiB output budget.
    { code: `for (let i = 0; i < 7; i++) console.log("y".repeat(9000));\nreturn "z".repeat(1000)` },
    { code: `return "z".repeat(70000)` },
    // A program of almost 1 MiB (the input limit), and one over it.
    { code: `return ${JSON.stringify("q".repeat(1_040_000))}.length` },
    { code: `return ${JSON.stringify("q".repeat(1_100_000))}.length` },
  ],
  cancel: [
    { code: `for (;;) {}`, config: { timeoutMs: 10000 }, cancelAfterMs: 300 },
    { code: `new Array(2 ** 32 - 1).join("")`, config: { timeoutMs: 10000 }, cancelAfterMs: 300 },
    { code: `text("calling"); await tools.lookup({ id: 1 }); return 1`, config: { timeoutMs: 10000 }, cancelAfterMs: 200, unanswered: true },
  ],
};
const hostileSeq = Object.fromEntries(CATEGORIES.map((c) => [c, 0]));
async function hostileExec(category) {
  const list = HOSTILE[category];
  const h = list[hostileSeq[category]++ % list.length];
  const scope = await openScope(`hostile-${category}`);
  const r = await runExec(scope, h.code, h.config ?? {}, { answerDelay: h.unanswered ? () => false : () => 1, cancelAfterMs: h.cancelAfterMs });
  void closeScope(scope);
  return r;
}

// ---------------------------------------------------------------- phases
const pct = (xs, p) => (xs.length ? xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] : NaN);
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const bench0 = performance.now();
const results = [];

/**
 * Offers RATE benign execs/s for `seconds`; with `hostile`, every tenth slot of the
 * schedule (RATE/0.9 slots/s) is a hostile exec, so benign traffic is the same in every phase.
 */
async function phase(name, hostile, seconds, { record = true } = {}) {
  logs.phase = name;
  const stats = { name, benign: [], hostile: [], rss: [], orchRss: [], queue: [], heap: [], t0: performance.now() };
  const sample = () => {
    stats.rss.push({ t: (performance.now() - stats.t0) / 1000, mb: rssMiB(sidecar.child.pid) });
    stats.orchRss.push(rssMiB(orchestrator.child.pid));
    void sidecarGauges().then((g) => {
      stats.queue.push(g.queue);
      stats.heap.push(g);
    });
  };
  sample();
  const sampler = setInterval(sample, SAMPLE_MS);
  const inflight = new Set();
  const track = (p) => {
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  };
  const slotMs = 1000 / (RATE / 0.9);
  const end = stats.t0 + seconds * 1000;
  let nextCat = 0;
  for (let i = 0; ; i++) {
    const due = stats.t0 + i * slotMs;
    if (due >= end) break;
    await sleep(due - performance.now());
    if (i % 10 === 9) {
      if (!hostile) continue;
      const category = hostile === "mix" ? ONLY[nextCat++ % ONLY.length] : hostile;
      track(
        hostileExec(category).then(
          (r) => stats.hostile.push({ ...r, category }),
          (err) => stats.hostile.push({ outcome: `bench error ${err?.code ?? err}`, ms: 0, category }),
        ),
      );
    } else {
      track(
        benignExec().then(
          (r) => stats.benign.push(r),
          (err) => stats.benign.push({ outcome: `bench error ${err?.code ?? err}`, ms: 0, ok: false }),
        ),
      );
    }
  }
  // Samples from here on are of the drain (no new traffic), not of the phase's load.
  stats.offeredS = (performance.now() - stats.t0) / 1000;
  await Promise.race([Promise.allSettled([...inflight]), sleep(60_000)]);
  clearInterval(sampler);
  sample();
  stats.leftInFlight = inflight.size;
  if (record) results.push(stats);
  return stats;
}

const fmtMs = (x) => (Number.isFinite(x) ? (x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(1)} ms`) : "-");
/** Outcomes by status/code with their median time; `why` adds one message of each (truncated). */
const tallyOf = (rows, why = false) => {
  const m = new Map();
  for (const r of rows) {
    // With `why`, outcomes are told apart by their message (its first words).
    const key =
      why && r.error
        ? `${r.outcome}\u0000${String(r.error)
            .replace(/[0-9]+/g, "N")
            .slice(0, 60)}`
        : r.outcome;
    const e = m.get(key) ?? { n: 0, ms: [], error: r.error, outcome: r.outcome };
    e.n++;
    e.ms.push(r.ms);
    m.set(key, e);
  }
  return [...m.values()]
    .sort((a, b) => b.n - a.n)
    .map((e) => `${e.outcome} ×${e.n} (p50 ${fmtMs(pct(e.ms, 50))}${why && e.error ? `: "${String(e.error).slice(0, 110)}"` : ""})`);
};

/** Least-squares slope of RSS over time, MiB per minute, and twice its standard error (about 95%). */
function slopePerMin(points) {
  const n = points.length;
  if (n < 3) return { slope: NaN, ci: NaN };
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const mm = points.reduce((s, p) => s + p.mb, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.mb - mm);
    den += (p.t - mt) ** 2;
  }
  const b = num / den;
  const residual = points.reduce((sum, p) => sum + (p.mb - (mm + b * (p.t - mt))) ** 2, 0) / (n - 2);
  return { slope: b * 60, ci: 2 * Math.sqrt(residual / den) * 60 };
}

console.error(
  `hostile-mix: sidecar pid ${sidecar.child.pid} on ${sandboxAt}, orchestrator pid ${orchestrator.child.pid}; ${RATE} benign execs/s; phases of ${SECONDS} s: baseline, ${ONLY.join(", ")}; soak ${MINUTES} min`,
);
await phase("warm-up", null, Math.min(10, SECONDS), { record: false });
const progress = (s) => {
  const ok = s.benign.filter((r) => r.ok).length;
  console.error(
    `  ${s.name}: benign ${ok}/${s.benign.length}, p99 ${fmtMs(
      pct(
        s.benign.map((r) => r.ms),
        99,
      ),
    )}, hostile ${s.hostile.length}, RSS ${s.rss.at(-1).mb.toFixed(0)} MiB, ${((performance.now() - bench0) / 60000).toFixed(1)} min elapsed`,
  );
};
progress(await phase("baseline", null, SECONDS));
for (const c of ONLY) progress(await phase(c, c, SECONDS));
if (MINUTES > 0) progress(await phase(ONLY.length ? "soak: all categories mixed" : "soak: benign only", ONLY.length ? "mix" : null, MINUTES * 60));
// Does the memory come back once traffic stops?
logs.phase = "idle";
if (MINUTES > 0) await sleep(30_000);
const idleRss = rssMiB(sidecar.child.pid);

// ---------------------------------------------------------------- report
const base = results[0];
const baseP99 = pct(
  base.benign.map((r) => r.ms),
  99,
);
const verdict = (ok) => (ok ? "pass" : "FAIL");
const lines = [];
const out = (s = "") => lines.push(s);
out(
  `hostile-mix: ${RATE} benign execs/s offered (open loop), hostile = 10% of traffic in hostile phases, ${SECONDS} s per phase, soak ${MINUTES} min; node ${process.version}, ${cpus().length} cores, sidecar threads ${logs.threads ?? values.threads ?? "?"}, 8 execs per worker, ${mallocSettings()}`,
);
out(
  `latency = Exec call to its Result as the gateway sees it, over every benign exec whatever its outcome; targets: success >= ${TARGET.success}%, p99 <= ${TARGET.p99Ratio}x baseline p99 (${fmtMs(baseP99)}), sidecar RSS growth <= ${TARGET.rssMiBPerMin} MiB/min`,
);
out();
out(
  `| phase | benign execs | success | target ≥${TARGET.success}% | benign not ok: refused at the edge / failed or waiting | p50 | p99 | p99 / baseline | target ≤${TARGET.p99Ratio}× | hostile execs | sidecar RSS MiB (start → max → end) |`,
);
out(`|---|---|---|---|---|---|---|---|---|---|---|`);
for (const s of results) {
  const ms = s.benign.map((r) => r.ms);
  const ok = s.benign.filter((r) => r.ok).length;
  const rate = (100 * ok) / Math.max(1, s.benign.length);
  const p99 = pct(ms, 99);
  const ratio = p99 / baseP99;
  const mbs = s.rss.map((p) => p.mb);
  const refused = s.benign.filter((r) => r.outcome.startsWith("rpc ")).length;
  out(
    `| ${s.name} | ${s.benign.length} | ${rate.toFixed(2)}% | ${verdict(rate >= TARGET.success)} | ${refused} / ${s.benign.length - ok - refused} | ${fmtMs(pct(ms, 50))} | ${fmtMs(p99)} | ${s === base ? "1.00×" : `${ratio.toFixed(2)}×`} | ${s === base ? "-" : verdict(ratio <= TARGET.p99Ratio)} | ${s.hostile.length} | ${mbs[0].toFixed(0)} → ${Math.max(...mbs).toFixed(0)} → ${mbs.at(-1).toFixed(0)} |`,
  );
}
out();
for (const s of results) {
  out(`${s.name}:`);
  const bad = s.benign.filter((r) => !r.ok);
  out(
    `  benign failures: ${bad.length ? tallyOf(bad, true).join("; ") : "none"}${s.leftInFlight ? `; ${s.leftInFlight} execs still unsettled 60 s after the phase` : ""}`,
  );
  if (s.hostile.length) out(`  hostile outcomes: ${tallyOf(s.hostile).join("; ")}`);
  out(
    `  sidecar RSS MiB every ${SAMPLE_MS / 1000} s: ${s.rss.map((p) => p.mb.toFixed(0)).join(" ")}  (orchestrator ${s.orchRss[0].toFixed(0)} → ${s.orchRss.at(-1).toFixed(0)}); execs waiting for a worker: ${s.queue.join(" ")}`,
  );
  out(`  sidecar main thread's V8 heap MiB, total/used: ${s.heap.map((h) => `${h.heapTotal.toFixed(0)}/${h.heapUsed.toFixed(0)}`).join(" ")}`);
  out(`  sidecar threads beyond --threads, surge+background: ${s.heap.map((h) => `${h.surge}+${h.background}`).join(" ")}`);
  out(
    `  sidecar worker threads' memory MiB, V8 heaps/external/kept for reuse: ${s.heap.map((h) => `${h.workerHeap.toFixed(0)}/${h.workerExternal.toFixed(0)}/${h.workerKept.toFixed(0)}`).join(" ")}`,
  );
  const ans = [...(answers.get(s.name) ?? new Map())].sort((a, b) => b[1].n - a[1].n);
  if (ans.length) out(`  tool answers (BridgeCallback): ${ans.map(([k, e]) => `${k} ×${e.n} (p99 ${fmtMs(pct(e.ms, 99))})`).join("; ")}`);
  const tally = [...(logs.tally.get(s.name) ?? new Map())].sort((a, b) => b[1] - a[1]).slice(0, 6);
  if (tally.length) out(`  logs (besides "exec finished"): ${tally.map(([k, n]) => `${k} ×${n}`).join("; ")}`);
}
if (MINUTES > 0) {
  const soak = results.at(-1);
  // Only the samples taken while the soak's traffic was offered: after it, RSS falls as the
  // queued hostile execs drain (up to 60 s), which would pull the slope down.
  const during = soak.rss.filter((p) => p.t <= soak.offeredS);
  const drain = soak.rss.filter((p) => p.t > soak.offeredS);
  const all = slopePerMin(during);
  const half = slopePerMin(during.filter((p) => p.t >= soak.offeredS / 2));
  // Each minute's lowest sample: the memory-growth guests' 64 MiB instances, which come and
  // go between samples, do not lift it, so its slope shows what the process keeps.
  const floors = [];
  for (let m = 0; m * 60 < soak.offeredS; m++) {
    const inMinute = during.filter((p) => p.t >= m * 60 && p.t < (m + 1) * 60);
    if (inMinute.length > 0) floors.push({ t: m * 60 + 30, mb: Math.min(...inMinute.map((p) => p.mb)) });
  }
  const floorSlope = slopePerMin(floors);
  const first = during[0].mb;
  const last = during.at(-1).mb;
  out();
  out(
    `RSS soak (${MINUTES} min, benign + all hostile categories at 10%): sidecar ${first.toFixed(1)} → ${last.toFixed(1)} MiB (max ${Math.max(...during.map((p) => p.mb)).toFixed(1)}) while traffic was offered; least-squares growth ${all.slope.toFixed(2)} ± ${all.ci.toFixed(2)} MiB/min (±2 standard errors) over those ${during.length} samples: ${verdict(all.slope <= TARGET.rssMiBPerMin)} against ≤ ${TARGET.rssMiBPerMin} MiB/min over 10 min${all.slope - all.ci <= TARGET.rssMiBPerMin && all.slope + all.ci > TARGET.rssMiBPerMin ? " (the samples swing too much for this soak to resolve the target either way)" : ""}; ${half.slope.toFixed(2)} ± ${half.ci.toFixed(2)} MiB/min over its second half${drain.length ? `; then ${drain.length} samples while in-flight execs drained, ${drain[0].mb.toFixed(0)} → ${drain.at(-1).mb.toFixed(0)} MiB (not in the slope)` : ""}`,
  );
  out(
    `each minute's lowest sample: ${floors.map((p) => p.mb.toFixed(0)).join(" ")} MiB; their least-squares growth ${floorSlope.slope.toFixed(2)} ± ${floorSlope.ci.toFixed(2)} MiB/min`,
  );
  out(
    `whole run: sidecar RSS ${results[0].rss[0].mb.toFixed(1)} MiB at the baseline's start, ${last.toFixed(1)} MiB when the soak ended, ${idleRss.toFixed(1)} MiB after 30 s without traffic; ${((performance.now() - bench0) / 60000).toFixed(1)} min`,
  );
}
console.log(lines.join("\n"));

logs.file?.end();
sandbox.close();
control.close();
sidecar.child.kill("SIGTERM");
orchestrator.child.kill("SIGTERM");
