// The floor of this service's shape, for bench/shape-floor.bench.mjs: a process with a
// grpc-js server on its main thread and QuickJS in worker threads, and nothing else. It
// serves the calls the plain gateway makes (Control.OpenRun, Sandbox.Exec, BridgeCallback,
// ExecSession) the plain way (protobuf-es toBinary/fromBinary serializers, grpc-js defaults)
// with no run state, catalog, policy, limits, records or checks: each exec goes to a free
// worker thread, each nested call goes out as a ToolCallRequested and its answer back to the
// thread. What the service adds to a nested call is measured against this. With --inline, one
// VM runs on the main thread itself, beside the connection (no thread hop, and nothing between
// a program and the server's other calls): what the shape costs without its worker threads.
//
//   node bench/lib/shape-server.mjs [--threads 2] [--inline]  -> prints "ready sandbox=H:P orchestrator=H:P"
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { Sandbox, ExecEventSchema, BridgeCallbackResponseSchema } from "../../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control, OpenRunResponseSchema } from "../../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { ResultStatus } from "../../dist/gen/codemode/common/v1/common_pb.js";
import { plainDefinition } from "./plain-definition.mjs";
import { shapeVm } from "./shape-worker.mjs";

const { values } = parseArgs({ options: { threads: { type: "string", default: "2" }, inline: { type: "boolean", default: false } } });

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const workers = [];
const queue = [];
/** Live execs by id: where their nested calls go, and who hears the end. */
const execs = new Map();
/** Nested calls awaiting an answer: call id -> the worker holding the VM. */
const calls = new Map();
let nextExec = 0;

/** A VM on this thread, reached as a worker is: each message in a microtask of its own. */
async function inlineVm() {
  const listeners = [];
  const onMessage = await shapeVm(wasm, (m) =>
    queueMicrotask(() => {
      for (const l of listeners) l(m);
    }),
  );
  return {
    postMessage: (m) => queueMicrotask(() => onMessage(m)),
    on: (event, l) => event === "message" && listeners.push(l),
  };
}

for (let i = 0; i < (values.inline ? 1 : Number(values.threads)); i++) {
  const worker = values.inline ? await inlineVm() : new Worker(new URL("./shape-worker.mjs", import.meta.url), { workerData: { wasm } });
  const slot = { worker, busy: false };
  worker.on("message", (m) => {
    if (m.t === "ready") return;
    const exec = execs.get(m.exec);
    if (!exec) return;
    if (m.t === "call") {
      calls.set(m.callId, worker);
      exec.onCall(m);
    } else if (m.t === "done") {
      execs.delete(m.exec);
      slot.busy = false;
      exec.onDone(m);
      const next = queue.shift();
      if (next) next();
    }
  });
  worker.on("error", (err) => {
    process.stderr.write(`shape worker failed: ${err.stack}\n`);
    process.exit(1);
  });
  workers.push(slot);
  if (!values.inline) await new Promise((resolve) => worker.once("message", resolve));
}

/** Runs `code` on a free thread; `onCall` for each nested call, `onDone` at the end. */
function startExec(code, onCall, onDone) {
  const go = () => {
    const slot = workers.find((w) => !w.busy);
    if (!slot) return queue.push(go);
    slot.busy = true;
    const exec = ++nextExec;
    execs.set(exec, { onCall, onDone });
    slot.worker.postMessage({ t: "exec", exec, code });
  };
  go();
}

function answer(callId, json) {
  const worker = calls.get(callId);
  if (!worker) return false;
  calls.delete(callId);
  worker.postMessage({ t: "answer", callId, json });
  return true;
}

const toolCallEvent = (m) => create(ExecEventSchema, { event: { case: "toolCall", value: { callId: m.callId, toolName: m.name, inputJson: m.inputJson } } });
const resultEvent = (m) =>
  create(ExecEventSchema, {
    event: {
      case: "result",
      value: m.error === undefined ? { status: ResultStatus.COMPLETED, valueJson: m.valueJson } : { status: ResultStatus.FAILED, error: m.error },
    },
  });

const sandbox = {
  exec(call) {
    startExec(
      call.request.code ?? "",
      (m) => call.write(toolCallEvent(m)),
      (m) => {
        call.write(resultEvent(m));
        call.end();
      },
    );
  },
  bridgeCallback(call, callback) {
    const r = call.request;
    const delivered = r.outcome.case === "resultJson" && answer(r.callId, r.outcome.value);
    callback(null, create(BridgeCallbackResponseSchema, { deliveredLive: delivered }));
  },
  execSession(call) {
    call.on("data", (req) => {
      if (req.message.case === "exec") {
        startExec(
          req.message.value.code ?? "",
          (m) => call.write(toolCallEvent(m)),
          (m) => call.write(resultEvent(m)),
        );
      } else if (req.message.case === "answer" && req.message.value.outcome.case === "resultJson") {
        answer(req.message.value.callId, req.message.value.outcome.value);
      }
    });
    call.on("end", () => call.end());
  },
};
const control = {
  openRun(_call, callback) {
    callback(null, create(OpenRunResponseSchema, {}));
  },
};

const server = new grpc.Server();
server.addService(plainDefinition(Sandbox), sandbox);
server.addService(plainDefinition(Control), control);
const port = await new Promise((resolve, reject) =>
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
);
process.stdout.write(`ready sandbox=127.0.0.1:${port} orchestrator=127.0.0.1:${port}\n`);
process.on("SIGTERM", () => server.tryShutdown(() => process.exit(0)));
