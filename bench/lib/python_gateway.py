"""A plain Python gateway for bench/exec-latency.bench.mjs (issue 34).

What a gateway team on Python writes: Debian's /usr/bin/python3, grpcio, and the stubs
clients/python/generate.sh makes from proto/ (protoc's *_pb2 and *_pb2_grpc), with grpcio's
default channel options. Nothing of codemode_client.

    /usr/bin/python3 bench/lib/python_gateway.py STUBS_DIR SANDBOX_ADDRESS ORCHESTRATOR_ADDRESS

Opens one run with the bench's two tools, prints `ready`, then answers commands on stdin, one
a line, with one JSON line on stdout, as bench/lib/plain-gateway.mjs does:

    run W2 BridgeCallback 200   -> {"samples": [ms, ...]}   (or {"error": "..."})
    run W2 ExecSession 1

A sample is one exec, timed from its send to its Result event. Exec: each ToolCallRequested is
answered with BridgeCallback.future (the stream's reader never blocks on an answer).
ExecSession: the request side is a generator fed from a queue, answers go on the stream.
"""

import json
import os
import queue
import sys
import time

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from codemode.common.v1 import common_pb2  # noqa: E402
from codemode.orchestrator.v1 import control_pb2, control_pb2_grpc  # noqa: E402
from codemode.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc  # noqa: E402

# The programs and tools of bench/lib/workloads.mjs, copied as plain strings.
PROGRAMS = {
    "W1": ("return 1 + 1", 2),
    "W2": ("let s = 0; for (let i = 0; i < 10; i++) s += (await tools.echo({ i })).i; return s", 45),
    "W3": (
        "const r = await Promise.all(Array.from({ length: 16 }, (_, i) => tools.echo({ i }))); "
        "return r.reduce((a, x) => a + x.i, 0)",
        120,
    ),
}
TOOLS = [
    common_pb2.Tool(
        name="echo",
        label="Echo",
        description="Returns its input unchanged. Useful to test the tool bridge.",
        parameters_json=json.dumps({"type": "object", "additionalProperties": True}),
        source=common_pb2.TOOL_SOURCE_OPENCLAW,
        source_name="core",
        origin=common_pb2.TOOL_ORIGIN_CORE,
    ),
    common_pb2.Tool(
        name="rows",
        label="List orders",
        description="Lists recent orders with their customer, region, status, amount in cents and creation time.",
        parameters_json=json.dumps(
            {
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "Most rows to return"}
                },
            }
        ),
        source=common_pb2.TOOL_SOURCE_OPENCLAW,
        source_name="core",
        origin=common_pb2.TOOL_ORIGIN_CORE,
    ),
]

sandbox_address, orchestrator_address = sys.argv[2], sys.argv[3]
sandbox = sandbox_pb2_grpc.SandboxStub(grpc.insecure_channel(sandbox_address))
control = control_pb2_grpc.ControlStub(grpc.insecure_channel(orchestrator_address))
pid = os.getpid()
scope = common_pb2.RunScope(
    agent_id="python-agent",
    session_id=f"python-session-{pid}",
    session_key=f"python-key-{pid}",
    agent_run_id=f"python-run-{pid}",
)
control.OpenRun(
    control_pb2.OpenRunRequest(
        scope=scope,
        tools=control_pb2.InlineCatalog(tools=TOOLS),
        config=common_pb2.CodeModeConfig(max_tool_calls_per_run=100_000, max_searches_per_run=100_000),
    ),
    timeout=30,
)


def check(result, expect):
    if result.status != common_pb2.RESULT_STATUS_COMPLETED:
        raise RuntimeError(f"expected completed, got {result.status}: {result.model_json[:300]}")
    value = json.loads(result.value_json)
    if value != expect:
        raise RuntimeError(f"expected value {expect}, got {result.value_json[:100]}")


def exec_bridge(code, expect):
    t = time.perf_counter()
    result = None
    at = None
    answers = []
    for ev in sandbox.Exec(sandbox_pb2.ExecRequest(scope=scope, code=code), timeout=60):
        kind = ev.WhichOneof("event")
        if kind == "tool_call":
            tc = ev.tool_call
            answers.append(
                sandbox.BridgeCallback.future(
                    sandbox_pb2.BridgeCallbackRequest(scope=scope, call_id=tc.call_id, result_json=tc.input_json),
                    timeout=60,
                )
            )
        elif kind == "result":
            at = time.perf_counter()
            result = ev.result
    for f in answers:
        f.result()  # raises on a failed answer
    if result is None:
        raise RuntimeError("stream ended without a Result")
    check(result, expect)
    return (at - t) * 1000


def exec_session(code, expect):
    t = time.perf_counter()
    outbox = queue.SimpleQueue()
    outbox.put(sandbox_pb2.ExecSessionRequest(exec=sandbox_pb2.ExecRequest(scope=scope, code=code)))
    result = None
    at = None
    try:
        for ev in sandbox.ExecSession(iter(outbox.get, None), timeout=60):
            kind = ev.WhichOneof("event")
            if kind == "tool_call":
                tc = ev.tool_call
                outbox.put(
                    sandbox_pb2.ExecSessionRequest(
                        answer=sandbox_pb2.BridgeCallbackRequest(call_id=tc.call_id, result_json=tc.input_json)
                    )
                )
            elif kind == "answer_refused":
                raise RuntimeError(f"answer refused: {ev.answer_refused.message}")
            elif kind == "result":
                at = time.perf_counter()
                result = ev.result
                outbox.put(None)  # ends the request side
    finally:
        outbox.put(None)  # and on an error, so grpcio's request thread does not block forever
    if result is None:
        raise RuntimeError("session ended without a Result")
    check(result, expect)
    return (at - t) * 1000


WAYS = {"BridgeCallback": exec_bridge, "ExecSession": exec_session}

print("ready", flush=True)
for line in sys.stdin:
    parts = line.split()
    if parts and parts[0] == "quit":
        break
    try:
        if len(parts) < 3 or parts[0] != "run" or parts[1] not in PROGRAMS or parts[2] not in WAYS:
            raise RuntimeError(f"unknown command: {line.strip()}")
        code, expect = PROGRAMS[parts[1]]
        way = WAYS[parts[2]]
        reply = {"samples": [way(code, expect) for _ in range(int(parts[3]) if len(parts) > 3 else 1)]}
    except Exception as err:  # noqa: BLE001 - reported to the bench, which counts it
        reply = {"error": f"{type(err).__name__}: {err}"}
    print(json.dumps(reply), flush=True)
