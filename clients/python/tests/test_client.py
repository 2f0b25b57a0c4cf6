"""The Python gateway client against the real service (`codemode start` on port 0).

Run from the repository root, after clients/python/generate.sh:
    /usr/bin/python3 -m unittest discover -s clients/python/tests -v
(test/python-client.test.ts does this inside `npm test`; the service runs from dist/.)
"""
from __future__ import annotations

import base64
import http.server
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid
from pathlib import Path
from collections.abc import Callable
from typing import Any, ClassVar

CLIENT_DIR = Path(__file__).resolve().parents[1]
REPO = CLIENT_DIR.parents[1]
sys.path.insert(0, str(CLIENT_DIR))

from codemode_client import (  # noqa: E402
    ANSWER_LATER,
    AllowedCallers,
    AlreadyExists,
    Annotations,
    ApprovalDecision,
    CodeModeClient,
    CodeModeConfig,
    CodeModeError,
    ErrorCode,
    ExecFailed,
    FailedPrecondition,
    InvalidArgument,
    McpServerSpec,
    NamespaceSpec,
    NeedsApproval,
    NotFound,
    OutputItem,
    PermissionDenied,
    Policy,
    Refusal,
    ReplayReport,
    ReplayVerdict,
    Run,
    Scope,
    Secret,
    SessionStore,
    Status,
    ToolCall,
    ToolFailure,
    ToolOrigin,
    ToolSource,
    ToolSpec,
    Unavailable,
    WaitReason,
    dispatch,
    ns_context,
    ns_tool,
)
from codemode_client._proto import common_pb2  # noqa: E402
from codemode_client.models import ENUM_WIRE  # noqa: E402


def start_service(extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str, str, Path]:
    """`codemode start` on port 0 (bin/codemode.js, or $CODEMODE_BIN); returns the process,
    the sandbox and orchestrator addresses from its ready line, and the file its stderr goes to.
    ``extra_env`` is added to its environment (e.g. the OTEL_* variables that turn tracing on)."""
    node = os.environ.get("CODEMODE_NODE") or shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH (set CODEMODE_NODE)")
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"codemode-python-client-{os.getpid()}-{uuid.uuid4().hex[:8]}.log"
    err = log.open("w")
    proc = subprocess.Popen(
        [node, os.environ.get("CODEMODE_BIN") or str(REPO / "bin" / "codemode.js"), "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        env={**os.environ, "CODEMODE_LOG_LEVEL": os.environ.get("CODEMODE_LOG_LEVEL", "warn"), **(extra_env or {})},
    )
    err.close()
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        if line.startswith("ready "):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            return proc, fields["sandbox"], fields["orchestrator"], log
    proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    raise RuntimeError(f"no ready line from codemode start:\n{log.read_text()}")


_seq = 0


def new_scope(prefix: str = "py") -> Scope:
    global _seq
    _seq += 1
    tag = f"{_seq}-{uuid.uuid4().hex[:8]}"
    return Scope(agent_id=f"{prefix}-agent", session_id=f"{prefix}-session-{tag}", session_key=f"{prefix}-key", agent_run_id=f"{prefix}-run-{tag}")


def weather(args: dict[str, Any]) -> dict[str, Any]:
    return {"city": args["city"], "tempC": 4}


def broken(args: dict[str, Any]) -> Any:
    raise LookupError(f"no station for {args.get('city')}")


def quota(args: dict[str, Any]) -> Any:
    raise ToolFailure("daily quota used up", name="QuotaExceeded")


def create_issue(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"created: {args['title']}"}], "structuredContent": {"number": 7}}


CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    ToolSpec("weather", "Current weather for a city.", CITY, handler=weather, label="Weather", keywords=("forecast",)),
    ToolSpec("broken", "Always fails.", CITY, handler=broken),
    ToolSpec("quota", "Fails with a named error.", handler=quota),
    ToolSpec("pick_file", "Ask the user for a file.", source=ToolSource.CLIENT, owner="app", handler=lambda a: {"path": "/tmp/x"}),
    ToolSpec(
        "create_issue",
        "Create an issue.",
        {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        source=ToolSource.MCP,
        owner="github",
        output_schema={"type": "object", "properties": {"number": {"type": "integer"}}},
        annotations=Annotations(title="Create issue", destructive_hint=True),
        examples=({"title": "Bug"},),
        handler=create_issue,
    ),
]
GITHUB = McpServerSpec("github", server_id="github-mcp", title="GitHub", version="1.2.3", description="Issues.", instructions="Be nice.", aliases=("gh",))


class Stack:
    """One `codemode start` for the whole module (started once: each start costs seconds)."""

    proc: subprocess.Popen[str]
    log: Path
    sandbox: str
    orchestrator: str
    client: CodeModeClient


STACK = Stack()


def setUpModule() -> None:
    STACK.proc, STACK.sandbox, STACK.orchestrator, STACK.log = start_service()
    STACK.client = CodeModeClient(orchestrator=STACK.orchestrator, sandbox=STACK.sandbox)


def stop_service(proc: subprocess.Popen[str], log: Path) -> None:
    """SIGTERM, then the exit code must be 0 (a clean drain)."""
    proc.terminate()
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    if code != 0:
        raise AssertionError(f"codemode start exited {code} on SIGTERM:\n{log.read_text()}")
    log.unlink(missing_ok=True)


def tearDownModule() -> None:
    STACK.client.close()
    stop_service(STACK.proc, STACK.log)


class ServiceTestCase(unittest.TestCase):
    sandbox: ClassVar[str]
    orchestrator: ClassVar[str]
    client: ClassVar[CodeModeClient]

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox, cls.orchestrator, cls.client = STACK.sandbox, STACK.orchestrator, STACK.client

    def open(self, tools: list[ToolSpec] | None = None, **kw: Any) -> Run:
        return self.client.open_run(new_scope(), tools=TOOLS if tools is None else tools, mcp_servers=kw.pop("mcp_servers", [GITHUB]), **kw)


class EnumTest(unittest.TestCase):
    def test_python_enums_list_exactly_the_proto_values(self) -> None:
        for cls, (wrapper, prefix) in ENUM_WIRE.items():
            proto = {name.removeprefix(prefix).lower() for name in wrapper.keys() if not name.endswith("_UNSPECIFIED")}
            self.assertEqual({m.value for m in cls}, proto, cls.__name__)


class AllowedCallersWireTest(unittest.TestCase):
    """ToolSpec.allowed_callers on the wire (Tool.allowed_callers), without a service."""

    def test_each_value_maps_to_its_tool_callers(self) -> None:
        cases: list[tuple[Any, int]] = [
            (None, common_pb2.TOOL_CALLERS_UNSPECIFIED),
            ("both", common_pb2.TOOL_CALLERS_MODEL_AND_PROGRAM),
            ("model", common_pb2.TOOL_CALLERS_MODEL),
            ("program", common_pb2.TOOL_CALLERS_PROGRAM),
            (AllowedCallers.MODEL, common_pb2.TOOL_CALLERS_MODEL),
            (AllowedCallers.PROGRAM, common_pb2.TOOL_CALLERS_PROGRAM),
            (AllowedCallers.BOTH, common_pb2.TOOL_CALLERS_MODEL_AND_PROGRAM),
        ]
        for value, wire in cases:
            self.assertEqual(ToolSpec("t", allowed_callers=value).to_wire().allowed_callers, wire, value)
        self.assertEqual({m.value for m in AllowedCallers}, {"model", "program", "both"})
        # Every proto value but UNSPECIFIED is reachable from Python.
        reachable = {ToolSpec("t", allowed_callers=m).to_wire().allowed_callers for m in AllowedCallers}
        self.assertEqual(reachable, {v for k, v in common_pb2.ToolCallers.items() if not k.endswith("_UNSPECIFIED")})

    def test_an_unknown_value_is_refused_before_anything_is_sent(self) -> None:
        with self.assertRaises(ValueError):
            ToolSpec("t", allowed_callers="everyone").to_wire()  # type: ignore[arg-type]


class ApprovalWireTest(unittest.TestCase):
    """The approval options on the client side, without a service."""

    def test_config_and_tool_options(self) -> None:
        wire = CodeModeConfig(approval_timeout_ms=5000, approval_mode="error").to_wire()
        self.assertEqual((wire.approval_timeout_ms, wire.approval_mode), (5000, "error"))
        self.assertFalse(CodeModeConfig().to_wire().HasField("approval_mode"))
        self.assertEqual([ToolSpec("t").approval_reason, ToolSpec("t", needs_approval=True).approval_reason], [None, ""])
        self.assertEqual(ToolSpec("t", needs_approval="costs money").approval_reason, "costs money")
        with self.assertRaises(ValueError):
            NeedsApproval("no run", decide=lambda: True)

    def test_dispatch_asks_before_running_the_handler(self) -> None:
        ran: list[Any] = []
        asked: list[tuple[str, str]] = []

        def pay(args: Any) -> str:
            ran.append(args)
            return "paid"

        def approver(call: ToolCall, reason: str) -> bool:
            asked.append((call.call_id, reason))
            return True

        tool = ToolSpec("pay", handler=pay, needs_approval="moves money")
        call = ToolCall("c1", "openclaw:core:pay", "pay", ToolSource.OPENCLAW, "core", {"eur": 5}, '{"eur":5}', "exec-1", "cm_x")
        later = dispatch([tool])(call)
        self.assertEqual(later, NeedsApproval("moves money"))  # no approver: decided later
        request = dispatch([tool], approver=approver)(call)
        self.assertIsInstance(request, NeedsApproval)
        assert isinstance(request, NeedsApproval) and request.decide is not None and request.run is not None
        self.assertEqual(ran, [])  # nothing runs before the decision
        self.assertIs(request.decide(), True)
        self.assertEqual(asked, [("c1", "moves money")])
        self.assertEqual(request.run(), "paid")
        self.assertEqual(ran, [{"eur": 5}])


class SessionStoreWireTest(unittest.TestCase):
    """The session-store and awaitResults options on the client side, without a service."""

    def test_config_fields_map_to_the_proto_fields(self) -> None:
        config = CodeModeConfig(
            session_store=False,
            max_session_value_bytes=100,
            max_session_keys=3,
            max_session_bytes=2048,
            session_ttl_seconds=120,
            await_results=True,
            max_await_ms=5000,
        )
        wire = config.to_wire()
        self.assertEqual(
            (wire.session_store, wire.max_session_value_bytes, wire.max_session_keys, wire.max_session_bytes, wire.session_ttl_seconds, wire.await_results, wire.max_await_ms),
            (False, 100, 3, 2048, 120, True, 5000),
        )
        unset = CodeModeConfig().to_wire()
        for name in ("session_store", "max_session_value_bytes", "max_session_keys", "max_session_bytes", "session_ttl_seconds", "await_results", "max_await_ms"):
            self.assertFalse(unset.HasField(name), name)

    def test_a_session_is_named_by_a_scope_or_by_agent_and_key(self) -> None:
        # Refused before anything is sent (the addresses are never dialled).
        with CodeModeClient(orchestrator="127.0.0.1:1", sandbox="127.0.0.1:1") as offline:
            with self.assertRaises(ValueError):
                offline.get_session_store()
            with self.assertRaises(ValueError):
                offline.get_session_store(agent_id="a")
            with self.assertRaises(ValueError):
                offline.clear_session_store(new_scope(), agent_id="a", session_key="k")


class SecretAndReplayWireTest(unittest.TestCase):
    """Secret answers and replay on the client side, without a service."""

    def test_tool_and_config_options(self) -> None:
        self.assertFalse(ToolSpec("t").secret)
        self.assertEqual(ToolSpec("t", secret=True).to_wire(), ToolSpec("t").to_wire())  # never crosses the wire
        self.assertIs(CodeModeConfig(record_for_replay=False).to_wire().record_for_replay, False)
        self.assertFalse(CodeModeConfig().to_wire().HasField("record_for_replay"))
        report = ReplayReport("same", "same: 1 segment")
        self.assertTrue(report.same)
        self.assertEqual(ReplayVerdict("incomplete"), "incomplete")

    def test_dispatch_wraps_every_answer_of_a_secret_tool(self) -> None:
        def vault(args: Any) -> str:
            if args.get("name") == "sealed":
                raise ToolFailure("sealed", name="Sealed")
            return "k"

        call = ToolCall("c1", "openclaw:core:vault", "vault", ToolSource.OPENCLAW, "core", {}, "{}", "exec-1", "cm_x")
        sealed = ToolCall("c2", "openclaw:core:vault", "vault", ToolSource.OPENCLAW, "core", {"name": "sealed"}, '{"name":"sealed"}', "exec-1", "cm_x")
        self.assertEqual(dispatch([ToolSpec("vault", handler=vault, secret=True)])(call), Secret("k"))
        self.assertIsInstance(dispatch([ToolSpec("vault", handler=vault, secret=True)])(sealed), Secret)  # the error is inside, not raised
        with self.assertRaises(ToolFailure):
            dispatch([ToolSpec("vault", handler=vault)])(sealed)
        self.assertEqual(dispatch([ToolSpec("vault", handler=vault)])(call), "k")
        asked = dispatch([ToolSpec("vault", handler=vault, secret=True, needs_approval="reads a key")])(call)
        self.assertEqual(asked, Secret(NeedsApproval("reads a key")))

    def test_a_replay_names_its_run_one_way(self) -> None:
        # Refused before anything is sent (the addresses are never dialled).
        with CodeModeClient(orchestrator="127.0.0.1:1", sandbox="127.0.0.1:1") as offline:
            with self.assertRaises(ValueError):
                offline.replay()
            with self.assertRaises(ValueError):
                offline.replay(new_scope())
            with self.assertRaises(ValueError):
                offline.replay(new_scope(), "cm_x", record_json="{}")
            with self.assertRaises(ValueError):
                offline.replay(record_json="")


class SurfaceTest(ServiceTestCase):
    def test_allowed_callers_reach_the_surface(self) -> None:
        tools = [
            ToolSpec("ask_user", description="Ask the user.", allowed_callers="model"),
            ToolSpec("sum_rows", description="Sum rows.", allowed_callers=AllowedCallers.PROGRAM, handler=lambda i: 6),
            ToolSpec("weather", description="Weather.", handler=lambda i: "sunny"),
        ]
        run = self.open(tools=tools, mcp_servers=[])
        surface = run.describe_surface()
        self.assertEqual(surface.tool_names, ["exec", "wait", "ask_user"])
        self.assertEqual(surface.tools[2].tool_id, "openclaw:core:ask_user")
        result = run.exec('return [ALL_TOOLS.map((t) => t.name), await tools.sum_rows({})]')
        self.assertEqual(result.value, [["sum_rows", "weather"], 6])
        direct = self.open(tools=tools, mcp_servers=[], config=CodeModeConfig(enabled=False))
        self.assertEqual(direct.describe_surface().tool_names, ["ask_user", "weather"])

    def test_surface_is_exactly_exec_and_wait(self) -> None:
        run = self.open()
        assert run.surface is not None
        surface = run.describe_surface()
        self.assertEqual(surface, run.surface)
        self.assertTrue(surface.code_mode_active)
        self.assertEqual(surface.tool_names, ["exec", "wait"])
        model_tools = json.loads(surface.tools_json)
        self.assertEqual([t["name"] for t in model_tools], ["exec", "wait"])
        self.assertEqual(surface.serialized_bytes, len(surface.tools_json.encode()))
        self.assertEqual(model_tools[0]["input_schema"]["required"], ["code"])
        self.assertEqual(model_tools[1]["input_schema"]["required"], ["runId"])
        self.assertIn("MCP.<server>", surface.tools[0].description)  # the run sees an MCP server
        self.assertEqual(surface.catalog_size, len(TOOLS))
        self.assertEqual((surface.sources.openclaw, surface.sources.mcp, surface.sources.client), (3, 1, 1))

    def test_catalog_by_id_policy_and_disabled_code_mode(self) -> None:
        first = self.client.put_catalog(TOOLS, [GITHUB])
        self.assertEqual(self.client.put_catalog(TOOLS, [GITHUB]), first)
        self.assertTrue(first.catalog_id.startswith("sha256:"))
        self.assertEqual(first.tool_count, len(TOOLS))
        run = self.client.open_run(new_scope(), catalog_id=first.catalog_id, policy=Policy(deny=["mcp:github:*", "broken"]))
        self.assertEqual(run.catalog_id, first.catalog_id)
        self.assertEqual(run.describe_surface().catalog_size, len(TOOLS) - 2)
        denied = run.exec("try { await tools.call('openclaw:core:broken', {city: 'x'}); return 'called' } catch (e) { return e.message }")
        self.assertEqual(denied.status, Status.COMPLETED)
        self.assertNotEqual(denied.value, "called")

        off = self.open(config=CodeModeConfig(enabled=False))
        assert off.surface is not None
        self.assertFalse(off.surface.code_mode_active)
        self.assertIn("weather", off.surface.tool_names)  # direct tool exposure
        refused = off.exec("return 1")
        self.assertEqual((refused.status, refused.code), (Status.FAILED, ErrorCode.INVALID_INPUT))
        self.assertIn(refused.refusal, (Refusal.CODE_MODE_INACTIVE, Refusal.CODE_MODE_DISABLED))
        # Disabled by the exec's own config override on an active run.
        on = self.open()
        self.assertEqual(on.exec("return 1", config=CodeModeConfig(enabled=False)).refusal, Refusal.CODE_MODE_DISABLED)

        none = self.open(policy=Policy(allow_none=True))
        assert none.surface is not None
        self.assertFalse(none.surface.code_mode_active)
        self.assertEqual(none.exec("return 1").refusal, Refusal.CODE_MODE_INACTIVE)


class ExecTest(ServiceTestCase):
    def test_exec_completes_with_a_value_output_and_telemetry(self) -> None:
        run = self.open()
        streamed: list[OutputItem] = []
        result = run.exec("text('hi'); json({a: 1}); console.log('log', 2); return {sum: 1 + 1, list: [1, 'x', null]}", on_output=streamed.append)
        self.assertEqual(result.status, Status.COMPLETED)
        self.assertTrue(result.completed)
        self.assertEqual(result.value, {"sum": 2, "list": [1, "x", None]})
        self.assertEqual(json.loads(result.value_json), result.value)
        self.assertEqual([(o.kind, o.value) for o in result.output[:2]], [("text", "hi"), ("json", {"a": 1})])
        self.assertEqual(len(result.output), 3)
        self.assertEqual(streamed, list(result.output))
        # Every result names its code-mode run; the model sees it only when waiting.
        self.assertTrue(result.code_mode_run_id and result.code_mode_run_id.startswith("cm_"))
        self.assertNotIn("runId", json.loads(result.model_json))
        self.assertIsNone(result.refusal)
        assert result.telemetry is not None
        self.assertEqual(result.telemetry.model_visible_tools, ("exec", "wait"))
        self.assertEqual(result.telemetry.catalog_size, len(TOOLS))
        model = result.model
        self.assertEqual((model["status"], model["value"]), ("completed", result.value))
        self.assertEqual(model["output"][0], {"type": "text", "text": "hi"})

    def test_typescript_and_invalid_programs(self) -> None:
        run = self.open()
        ts = run.exec("const n: number = 40; return n + 2", language="typescript")
        self.assertEqual(ts.value, 42)
        self.assertEqual(run.exec("return (").refusal, Refusal.INVALID_PROGRAM)
        bad_language = run.exec("return 1", language="python")
        self.assertEqual((bad_language.code, bad_language.refusal), (ErrorCode.INVALID_INPUT, Refusal.INVALID_PROGRAM))
        self.assertEqual(run.exec(command="return 5").value, 5)
        thrown = run.exec("throw new TypeError('nope')")
        self.assertEqual(thrown.status, Status.FAILED)
        self.assertIsNone(thrown.code)  # an uncaught guest exception has no code
        self.assertIn("nope", thrown.error or "")

    def test_nested_calls_answered_by_the_callback(self) -> None:
        run = self.open()
        result = run.exec(
            """
            const w = await tools.weather({ city: "Oslo" });
            const byId = await tools.call("client:app:pick_file", {});
            const errors = [];
            for (const name of ["broken", "quota"]) {
              try { await tools[name]({ city: "Nowhere" }); } catch (e) { errors.push([e.name, e.message]); }
            }
            return { w, byId, errors };
            """,
            exec_call_id="exec-call-1",
        )
        self.assertEqual(result.status, Status.COMPLETED, result.model_json)
        self.assertEqual(result.value["w"], {"city": "Oslo", "tempC": 4})
        self.assertEqual(result.value["byId"], {"path": "/tmp/x"})
        self.assertEqual(result.value["errors"], [["LookupError", "no station for Nowhere"], ["QuotaExceeded", "daily quota used up"]])
        calls = {c.tool_name: c for c in result.tool_calls}
        self.assertEqual(set(calls), {"weather", "pick_file", "broken", "quota"})
        self.assertEqual(calls["weather"].tool_id, "openclaw:core:weather")
        self.assertEqual((calls["weather"].source, calls["weather"].source_name), (ToolSource.OPENCLAW, "core"))
        self.assertEqual(calls["weather"].input, {"city": "Oslo"})
        self.assertEqual(json.loads(calls["weather"].input_json), {"city": "Oslo"})
        self.assertEqual((calls["pick_file"].tool_id, calls["pick_file"].source), ("client:app:pick_file", ToolSource.CLIENT))
        self.assertTrue(all(c.parent_call_id == "exec-call-1" for c in result.tool_calls))
        self.assertEqual(len({c.code_mode_run_id for c in result.tool_calls}), 1)
        # An explicit callback replaces the ToolSpecs' handlers; a value that is not JSON fails the call.
        custom = run.exec(
            "const a = await tools.weather({city: 'x'}); let b; try { await tools.weather({city: 'y'}) } catch (e) { b = e.name } return [a, b]",
            on_tool_call=lambda call: float("nan") if call.input["city"] == "y" else "custom",
        )
        self.assertEqual(custom.value, ["custom", "ValueError"])

    def test_parallel_calls_run_in_parallel(self) -> None:
        # Each handler answers only once all 8 are running at the same time: a client that
        # ran them one after another would break the barrier, and the calls would fail.
        together = threading.Barrier(8, timeout=30)

        def double(args: dict[str, Any]) -> int:
            together.wait()
            return int(args["i"]) * 2

        run = self.open([ToolSpec("double", "Doubles once all eight calls have arrived.", handler=double)])
        result = run.exec("return await Promise.all(Array.from({length: 8}, (_, i) => tools.double({ i })))", config=CodeModeConfig(timeout_ms=60_000))
        self.assertEqual(result.value, [i * 2 for i in range(8)], result.model_json)
        self.assertEqual(len(result.tool_calls), 8)
        self.assertFalse(together.broken)

    def test_mcp_call_has_the_exact_catalog_id(self) -> None:
        seen: list[ToolCall] = []

        def handler(call: ToolCall) -> Any:
            seen.append(call)
            return create_issue(call.input)

        run = self.open(on_tool_call=handler)
        result = run.exec(
            """
            const files = await API.list("mcp");
            const d = await API.read("mcp/github.d.ts");
            const issue = await MCP.github.createIssue({ title: "Investigate" });
            return { paths: files.map((f) => f.path), declares: d.includes("createIssue"),
                     inAllTools: ALL_TOOLS.some((t) => t.name === "create_issue"), issue };
            """
        )
        self.assertEqual(result.status, Status.COMPLETED, result.model_json)
        self.assertIn("mcp/github.d.ts", result.value["paths"])
        self.assertTrue(result.value["declares"])
        self.assertFalse(result.value["inAllTools"])
        self.assertEqual(result.value["issue"]["structuredContent"], {"number": 7})
        self.assertEqual(len(seen), 1)  # API.list/read are answered by the sidecar
        call = seen[0]
        self.assertEqual((call.tool_id, call.tool_name, call.source, call.source_name), ("mcp:github:create_issue", "create_issue", ToolSource.MCP, "github"))
        self.assertEqual(call.input, {"title": "Investigate"})

    def test_raise_for_failure(self) -> None:
        run = self.open()
        ok = run.exec("return 3")
        self.assertIs(ok.raise_for_failure(), ok)  # not failed: the result itself
        waiting = run.exec("await yield_control('x'); return 1")
        self.assertIs(waiting.raise_for_failure(), waiting)
        with self.assertRaises(ExecFailed) as refused:
            run.exec("return (").raise_for_failure()
        self.assertIsInstance(refused.exception, CodeModeError)
        self.assertEqual((refused.exception.code, refused.exception.refusal), (ErrorCode.INVALID_INPUT, Refusal.INVALID_PROGRAM))
        self.assertEqual(refused.exception.result.status, Status.FAILED)
        self.assertEqual(refused.exception.details, refused.exception.result.error)
        self.assertTrue(str(refused.exception).startswith("failed (invalid_input, invalid_program): "), str(refused.exception))
        with self.assertRaises(ExecFailed) as timed_out:
            run.exec("for (;;) {}", config=CodeModeConfig(timeout_ms=200)).raise_for_failure()
        self.assertEqual((timed_out.exception.code, timed_out.exception.refusal), (ErrorCode.TIMEOUT, None))
        with self.assertRaises(ExecFailed) as thrown:
            run.exec("throw new RangeError('too far')").raise_for_failure()
        self.assertEqual((thrown.exception.code, thrown.exception.refusal), (None, None))  # uncaught: no code
        self.assertIn("too far", thrown.exception.details)
        self.assertEqual(str(thrown.exception)[: len("failed (uncaught): ")], "failed (uncaught): ")
        with self.assertRaises(ExecFailed) as unknown_run:
            run.wait("cm_does_not_exist").raise_for_failure()
        self.assertEqual(unknown_run.exception.refusal, Refusal.RUN_UNAVAILABLE)

    def test_metadata_is_sent_and_trace_fields_are_strings(self) -> None:
        # Tracing is off in this module's service: the metadata is accepted and the nested
        # call's trace fields are empty strings (TracingTest covers a service with tracing on).
        run = self.open()
        traceparent = [("traceparent", f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01")]
        first = run.exec("const w = await tools.weather({city: 'Oslo'}); await yield_control('x'); return w", metadata=traceparent)
        self.assertEqual(first.status, Status.WAITING, first.model_json)
        (call,) = first.tool_calls
        self.assertEqual((call.trace_parent, call.trace_state), ("", ""))
        assert first.code_mode_run_id is not None
        self.assertEqual(run.wait(first.code_mode_run_id, metadata=traceparent).value, {"city": "Oslo", "tempC": 4})
        results = run.run_until_done("await yield_control('y'); return 2", metadata=traceparent)
        self.assertEqual(results[-1].value, 2)


class SuspendTest(ServiceTestCase):
    def test_slow_tool_waits_then_wait_completes(self) -> None:
        # The report is "slow" until the exec has returned waiting: its handler answers only
        # then, so the call is certainly pending at the deadline, however long the exec took.
        exec_returned = threading.Event()

        def report(args: dict[str, Any]) -> dict[str, Any]:
            if not exec_returned.wait(timeout=60):
                raise AssertionError("the exec never returned")
            return {"rows": 3}

        run = self.open([ToolSpec("report", "Slow.", handler=report), TOOLS[0]])
        # The deadline only has to leave room for the quick weather call before it.
        try:
            first = run.exec(
                "const w = await tools.weather({city: 'Oslo'}); text('before'); const r = await tools.report({}); return {w, r}",
                config=CodeModeConfig(timeout_ms=1000),
            )
        finally:
            exec_returned.set()
        self.assertEqual(first.status, Status.WAITING, first.model_json)
        self.assertEqual(first.reason, WaitReason.PENDING_TOOLS)
        assert first.code_mode_run_id is not None
        self.assertEqual([(p.tool_id, p.tool_name) for p in first.pending_calls], [("openclaw:core:report", "report")])
        model = first.model
        self.assertEqual(model["runId"], first.code_mode_run_id)  # what the model passes to wait
        self.assertEqual(model["pendingToolCalls"][0]["toolId"], "openclaw:core:report")
        self.assertEqual([o.value for o in first.output], ["before"])
        # The handler answers when it finishes, after the exec returned: kept with the run.
        self.assertTrue(self.client.join_answers(timeout=10))
        done = run.wait(first.code_mode_run_id)
        self.assertEqual(done.status, Status.COMPLETED, done.model_json)
        self.assertEqual(done.value, {"w": {"city": "Oslo", "tempC": 4}, "r": {"rows": 3}})
        # The code-mode run is settled: a second wait is refused.
        self.assertEqual(run.wait(first.code_mode_run_id).refusal, Refusal.RUN_UNAVAILABLE)
        steps = run.trajectory()
        self.assertEqual([s.kind for s in steps], ["exec", "wait", "wait"])
        self.assertEqual({n.tool_name for n in steps[0].nested_calls}, {"weather", "report"})

    def test_run_until_done_follows_waits(self) -> None:
        def slow(args: dict[str, Any]) -> str:
            time.sleep(0.5)
            return "late"

        run = self.open([ToolSpec("slow", "Slow.", handler=slow)])
        results = run.run_until_done("await yield_control('checkpoint'); return await tools.slow({})", max_waits=20)
        self.assertEqual(results[0].reason, WaitReason.YIELD)
        self.assertEqual(results[-1].status, Status.COMPLETED, [r.model_json for r in results])
        self.assertEqual(results[-1].value, "late")
        self.assertTrue(all(r.waiting for r in results[:-1]))
        bounded = run.run_until_done("for (;;) await yield_control('again')", max_waits=2)
        self.assertEqual([r.status for r in bounded], [Status.WAITING] * 3)

    def test_answer_later_on_a_suspended_run(self) -> None:
        run = self.open([ToolSpec("job", "A long job.")], on_tool_call=lambda call: ANSWER_LATER)
        first = run.exec("return await tools.job({n: 1})", config=CodeModeConfig(timeout_ms=150))
        self.assertEqual(first.status, Status.WAITING, first.model_json)
        assert first.code_mode_run_id is not None
        call_id = first.pending_calls[0].call_id
        stranger = self.open([ToolSpec("job", "A long job.")])
        with self.assertRaises(PermissionDenied):
            stranger.answer(call_id, "forged")
        self.assertFalse(run.answer(call_id, {"done": True}))  # delivered_live false: kept with the run
        with self.assertRaises(AlreadyExists):
            run.answer(call_id, {"done": "again"})
        done = run.wait(first.code_mode_run_id)
        self.assertEqual(done.value, {"done": True})
        # A failure answered later is a catchable guest error too.
        second = run.exec("try { await tools.job({}) } catch (e) { return [e.name, e.message] }", config=CodeModeConfig(timeout_ms=150))
        assert second.code_mode_run_id is not None
        run.fail(second.pending_calls[0].call_id, "job cancelled", name="Cancelled")
        self.assertEqual(run.wait(second.code_mode_run_id).value, ["Cancelled", "job cancelled"])

    def test_wait_refusals_carry_the_refusal_enum(self) -> None:
        run = self.open()
        unknown = run.wait("cm_does_not_exist")
        self.assertEqual((unknown.status, unknown.code, unknown.refusal), (Status.FAILED, ErrorCode.INVALID_INPUT, Refusal.RUN_UNAVAILABLE))
        self.assertEqual(unknown.error, "code mode run is unavailable or expired.")
        self.assertEqual(run.wait("").refusal, Refusal.MISSING_RUN_ID)
        suspended = run.exec("await yield_control('x'); return 1")
        assert suspended.code_mode_run_id is not None
        other_session = self.client.open_run(new_scope(), tools=TOOLS)
        refused = other_session.wait(suspended.code_mode_run_id)
        self.assertEqual((refused.refusal, refused.error), (Refusal.OTHER_SESSION, "code mode run belongs to a different session."))
        s = run.scope
        other_turn = self.client.open_run(Scope(s.agent_id, s.session_id, s.session_key, s.agent_run_id + "-next"), tools=TOOLS)
        self.assertEqual(other_turn.wait(suspended.code_mode_run_id).refusal, Refusal.OTHER_AGENT_RUN)
        # Refusals leave the run alone; CloseRun deletes it.
        self.assertEqual(run.close(), 1)


class ApprovalTest(ServiceTestCase):
    """Calls that need a person's approval: the approval-pending answer, then a decision."""

    def test_approval_pending_suspends_then_approve_completes_with_the_tools_result(self) -> None:
        run = self.open([ToolSpec("wire_money", "Moves money.")], on_tool_call=lambda call: NeedsApproval("moves 100 EUR"))
        asked_at = int(time.time() * 1000)
        first = run.exec("const r = await tools.wire_money({ eur: 100 }); return { r }", config=CodeModeConfig(timeout_ms=2000))
        self.assertEqual((first.status, first.reason), (Status.WAITING, WaitReason.APPROVAL), first.model_json)
        assert first.code_mode_run_id is not None
        (pending,) = first.pending_calls
        self.assertEqual(first.awaiting_approval, (pending,))
        self.assertEqual((pending.tool_id, pending.awaiting_approval, pending.approval_reason), ("openclaw:core:wire_money", True, "moves 100 EUR"))
        # No expiry given: the run's approval_timeout_ms (default 10 min) from when it was asked.
        self.assertGreaterEqual(pending.approval_expires_at_ms, asked_at + 590_000)
        self.assertLessEqual(pending.approval_expires_at_ms, int(time.time() * 1000) + 600_000)
        model = first.model
        self.assertEqual((model["status"], model["reason"], model["runId"]), ("waiting", "approval", first.code_mode_run_id))
        self.assertEqual(model["pendingToolCalls"][0]["awaitingApproval"], True)
        self.assertEqual(model["pendingToolCalls"][0]["approvalReason"], "moves 100 EUR")
        self.assertIsInstance(model["approval"], str)
        self.assertEqual(first.approval_message, model["approval"])
        assert first.telemetry is not None
        (record,) = first.telemetry.approvals
        self.assertEqual((record.call_id, record.tool_id, record.decision, record.reason), (pending.call_id, pending.tool_id, ApprovalDecision.PENDING, "moves 100 EUR"))
        self.assertEqual(record.decided_at_ms, 0)
        self.assertGreaterEqual(record.requested_at_ms, asked_at)
        # The call awaits approval already; another scope does not own it.
        with self.assertRaises(AlreadyExists):
            run.request_approval(pending.call_id, "asked twice")
        with self.assertRaises(PermissionDenied):
            self.open([ToolSpec("wire_money", "Moves money.")]).approve(pending.call_id, "forged")
        # Approved (the tool ran at the gateway): the answer is kept with the suspended run.
        self.assertFalse(run.approve(pending.call_id, {"wired": 100}))
        with self.assertRaises(AlreadyExists):
            run.deny(pending.call_id, "changed my mind")
        done = run.wait(first.code_mode_run_id)
        self.assertEqual(done.status, Status.COMPLETED, done.model_json)
        self.assertEqual(done.value, {"r": {"wired": 100}})
        # The wait's telemetry has the decision, with the reason and times it was asked and decided.
        assert done.telemetry is not None
        (decided,) = [a for a in done.telemetry.approvals if a.call_id == pending.call_id]
        self.assertEqual((decided.decision, decided.reason, decided.requested_at_ms), (ApprovalDecision.APPROVED, "moves 100 EUR", record.requested_at_ms))
        self.assertGreaterEqual(decided.decided_at_ms, decided.requested_at_ms)

    def test_denied_later_the_program_catches_approval_denied(self) -> None:
        run = self.open([ToolSpec("drop_table", "Drops a table.")], on_tool_call=lambda call: NeedsApproval("drops the users table"))
        first = run.exec(
            'try { await tools.call("openclaw:core:drop_table", { name: "users" }); return "dropped" } catch (e) { return e.name + ": " + e.message }',
            config=CodeModeConfig(timeout_ms=2000),
        )
        self.assertEqual((first.status, first.reason), (Status.WAITING, WaitReason.APPROVAL), first.model_json)
        assert first.code_mode_run_id is not None
        call_id = first.pending_calls[0].call_id
        self.assertFalse(run.deny(call_id, "not the users table"))
        done = run.wait(first.code_mode_run_id)
        self.assertEqual(done.status, Status.COMPLETED, done.model_json)
        self.assertEqual(done.value, "ApprovalDenied: not the users table")
        # The trajectory's nested call says it was denied, and when.
        nested = [n for step in run.trajectory() for n in step.nested_calls if n.call_id == call_id]
        self.assertTrue(nested, "the call is in the trajectory")
        self.assertEqual({(n.approval, n.approval_reason) for n in nested}, {("denied", "drops the users table")}, nested)
        self.assertTrue(all(n.approval_decided_at_ms >= n.approval_requested_at_ms > 0 for n in nested), nested)

    def test_approver_decides_and_the_tool_runs_only_when_approved(self) -> None:
        ran: list[str] = []
        asked: list[tuple[str, str]] = []

        def checked_weather(args: dict[str, Any]) -> dict[str, Any]:
            ran.append(args["city"])
            return weather(args)

        def approver(call: ToolCall, reason: str) -> bool | str:
            asked.append((call.input["city"], reason))
            return True if call.input["city"] == "Oslo" else "not for Lima"

        tool = ToolSpec("weather", "Current weather.", CITY, handler=checked_weather, needs_approval="reads your location")
        run = self.open([tool], approver=approver, mcp_servers=[])
        results = run.run_until_done(
            """
            const out = [];
            for (const city of ["Oslo", "Lima"]) {
              try { out.push(await tools.weather({ city })) } catch (e) { out.push(e.name + ": " + e.message) }
            }
            return out;
            """
        )
        done = results[-1]
        self.assertEqual(done.status, Status.COMPLETED, [r.model_json for r in results])
        self.assertEqual(done.value, [{"city": "Oslo", "tempC": 4}, "ApprovalDenied: not for Lima"])
        self.assertEqual(asked, [("Oslo", "reads your location"), ("Lima", "reads your location")])
        self.assertEqual(ran, ["Oslo"])  # the denied call never ran
        decisions = {a.decision for r in results if r.telemetry for a in r.telemetry.approvals}
        self.assertLessEqual({ApprovalDecision.APPROVED, ApprovalDecision.DENIED}, decisions)

    def test_approval_mode_error_fails_the_call_with_approval_required(self) -> None:
        asked: list[ToolCall] = []

        def approver(call: ToolCall, reason: str) -> bool:
            asked.append(call)
            return True

        tool = ToolSpec("deploy", "Deploys.", handler=lambda args: "deployed", needs_approval="needs a release manager")
        run = self.open([tool], approver=approver, mcp_servers=[], config=CodeModeConfig(approval_mode="error"))
        result = run.exec('try { await tools.deploy({}); return "deployed" } catch (e) { return [e.name, e.message] }')
        self.assertEqual(result.status, Status.COMPLETED, result.model_json)
        self.assertEqual(result.value[0], "ApprovalRequired")
        self.assertIn("needs a release manager", result.value[1])
        self.assertTrue(self.client.join_answers(timeout=10))
        self.assertEqual(asked, [])  # nobody is asked in "error" mode
        assert result.telemetry is not None
        self.assertEqual([(a.decision, a.reason) for a in result.telemetry.approvals], [(ApprovalDecision.REQUIRED, "needs a release manager")])

    def test_expiry_and_bad_requests(self) -> None:
        run = self.open([ToolSpec("job", "A job.")], on_tool_call=lambda call: ANSWER_LATER, config=CodeModeConfig(approval_timeout_ms=1000))
        with self.assertRaises(NotFound):
            run.request_approval("c_unknown", "why")
        first = run.exec("try { return await tools.job({}) } catch (e) { return e.name }", config=CodeModeConfig(timeout_ms=300))
        self.assertEqual((first.status, first.reason), (Status.WAITING, WaitReason.PENDING_TOOLS), first.model_json)
        assert first.code_mode_run_id is not None
        call_id = first.pending_calls[0].call_id
        with self.assertRaises(InvalidArgument):  # an expiry in the past
            run.request_approval(call_id, "too late", expires_at_ms=int(time.time() * 1000) - 60_000)
        # A later expiry is clamped to the run's approval_timeout_ms (1 s) from now.
        run.request_approval(call_id, "quick", expires_at_ms=int(time.time() * 1000) + 3_600_000)
        time.sleep(1.5)
        with self.assertRaises(FailedPrecondition):
            run.approve(call_id, "after the expiry")
        done = run.wait(first.code_mode_run_id)
        self.assertEqual(done.status, Status.COMPLETED, done.model_json)
        self.assertEqual(done.value, "ApprovalExpired")


class ReplayTest(ServiceTestCase):
    """Recorded code-mode runs replayed (GetReplayRecord / ReplayRun), and secret answers."""

    def test_a_secret_answer_is_not_recorded_and_the_replay_stops_there(self) -> None:
        run = self.open([ToolSpec("vault", "Reads a key.")], on_tool_call=lambda call: ANSWER_LATER, mcp_servers=[], config=CodeModeConfig(timeout_ms=300))
        first = run.exec("const k = await tools.vault({ name: 'db' }); return k.key.length")
        self.assertEqual(first.status, Status.WAITING, first.model_json)
        assert first.code_mode_run_id is not None
        (pending,) = first.pending_calls
        self.assertFalse(run.answer(pending.call_id, {"key": "hunter2-secret"}, secret=True))
        done = run.wait(first.code_mode_run_id)
        self.assertEqual((done.status, done.value), (Status.COMPLETED, 14), done.model_json)
        record = run.replay_record(first.code_mode_run_id)
        self.assertNotIn("hunter2", record)
        self.assertEqual([seg["kind"] for seg in json.loads(record)["segments"]], ["exec", "wait"])
        self.assertEqual(self.client.replay_record(run.scope, first.code_mode_run_id), record)
        report = run.replay(first.code_mode_run_id)
        self.assertIsInstance(report, ReplayReport)
        self.assertEqual(report.verdict, ReplayVerdict.INCOMPLETE, report.summary)
        self.assertFalse(report.same)
        self.assertIn("secret", report.summary)
        self.assertIn(pending.call_id, report.summary)
        self.assertEqual((report.report["verdict"], report.report["summary"]), ("incomplete", report.summary))
        self.assertEqual(json.loads(report.report_json), report.report)

    def test_a_secret_tools_results_and_errors_are_not_recorded(self) -> None:
        def vault(args: dict[str, Any]) -> dict[str, str]:
            return {"key": "s3cr3t-" + args["name"]}

        def sealed(args: Any) -> Any:
            raise ToolFailure("the vault db-7731 is sealed", name="Sealed")

        tools = [ToolSpec("weather", "Weather.", CITY, handler=weather), ToolSpec("vault", handler=vault, secret=True), ToolSpec("sealed", handler=sealed, secret=True)]
        run = self.open(tools, mcp_servers=[])
        result = run.exec(
            "const w = await tools.weather({ city: 'Oslo' }); const k = await tools.vault({ name: 'db' });"
            " let e; try { await tools.sealed({}) } catch (x) { e = x.name + ': ' + x.message.length } return [w.tempC, k.key.length, e]"
        )
        self.assertEqual((result.status, result.value), (Status.COMPLETED, [4, 9, "Sealed: 27"]), result.model_json)
        assert result.code_mode_run_id is not None
        record = run.replay_record(result.code_mode_run_id)
        self.assertNotIn("s3cr3t", record)
        self.assertNotIn("db-7731", record)
        self.assertIn("tempC", record)  # the weather tool's answer is not secret: it is kept
        report = run.replay(result.code_mode_run_id)
        self.assertEqual(report.verdict, ReplayVerdict.INCOMPLETE, report.summary)
        (vault_call,) = [c for c in result.tool_calls if c.tool_name == "vault"]
        self.assertIn(vault_call.call_id, report.summary)  # stops at the first secret answer

    def test_an_approved_secret_tools_result_is_not_recorded(self) -> None:
        tool = ToolSpec("unlock", handler=lambda args: {"pin": "9137-4402"}, secret=True, needs_approval="unlocks the door")
        run = self.open([tool], approver=lambda call, reason: True, mcp_servers=[])
        results = run.run_until_done("const r = await tools.unlock({}); return r.pin.length")
        done = results[-1]
        self.assertEqual((done.status, done.value), (Status.COMPLETED, 9), [r.model_json for r in results])
        assert done.code_mode_run_id is not None
        self.assertNotIn("9137", run.replay_record(done.code_mode_run_id))
        self.assertEqual(run.replay(done.code_mode_run_id).verdict, ReplayVerdict.INCOMPLETE)

    def test_a_suspended_run_replays_the_same_and_a_changed_program_diverges(self) -> None:
        run = self.open([ToolSpec("lookup", "Answers later.")], on_tool_call=lambda call: ANSWER_LATER, mcp_servers=[], config=CodeModeConfig(timeout_ms=300))
        code = "const t0 = Date.now(); const a = await tools.lookup({ n: 1 }); text('got ' + a.n); return { a, later: Date.now() >= t0, r: Math.random() < 1 }"
        first = run.exec(code)
        self.assertEqual((first.status, first.reason), (Status.WAITING, WaitReason.PENDING_TOOLS), first.model_json)
        assert first.code_mode_run_id is not None
        run_id = first.code_mode_run_id
        time.sleep(0.2)  # answered later: kept with the suspended run
        self.assertFalse(run.answer(first.pending_calls[0].call_id, {"n": 10}))
        done = run.wait(run_id)
        self.assertEqual((done.status, done.value), (Status.COMPLETED, {"a": {"n": 10}, "later": True, "r": True}), done.model_json)

        report = run.replay(run_id)
        self.assertEqual(report.verdict, ReplayVerdict.SAME, report.summary)
        self.assertTrue(report.same)
        self.assertTrue(report.summary.startswith("same"), report.summary)
        self.assertEqual(report.report["codeModeRunId"], run_id)
        self.assertEqual([(seg["kind"], seg["verdict"]) for seg in report.report["segments"]], [("exec", "same"), ("wait", "same")])

        # The record replays the same given whole; with its program changed, it diverges at the first changed call.
        record = run.replay_record(run_id)
        self.assertEqual(self.client.replay(record_json=record).verdict, ReplayVerdict.SAME)
        changed = json.loads(record)
        self.assertEqual(changed["segments"][0]["exec"]["source"], code)
        changed["segments"][0]["exec"]["source"] = code.replace("{ n: 1 }", "{ n: 2 }")
        diverged = self.client.replay(record_json=json.dumps(changed))
        self.assertEqual(diverged.verdict, ReplayVerdict.DIVERGED, diverged.summary)
        self.assertIn("nested call 1", diverged.summary)
        self.assertEqual(diverged.report["segments"][0]["divergence"]["replayed"]["input"], '{"n":2}')

    def test_unknown_runs_and_bad_records_are_refused(self) -> None:
        run = self.open()
        done = run.exec("return 1")
        assert done.code_mode_run_id is not None
        self.assertEqual(run.replay(done.code_mode_run_id).verdict, ReplayVerdict.SAME)
        stranger = self.open()
        with self.assertRaises(NotFound):  # another scope's run is as unknown as one never recorded
            stranger.replay(done.code_mode_run_id)
        with self.assertRaises(NotFound):
            stranger.replay_record(done.code_mode_run_id)
        unrecorded = self.open(config=CodeModeConfig(record_for_replay=False))
        plain = unrecorded.exec("return 2")
        assert plain.code_mode_run_id is not None
        with self.assertRaises(NotFound):
            unrecorded.replay_record(plain.code_mode_run_id)
        with self.assertRaises(InvalidArgument):
            run.replay_record("")
        with self.assertRaises(InvalidArgument):
            self.client.replay(record_json="{not json")


def store_scope(agent_run_id: str | None = None, session_key: str | None = None) -> Scope:
    """A scope with a session key of its own (``new_scope``'s scopes all share one session
    store: the store is named by agent_id and session_key)."""
    tag = uuid.uuid4().hex[:8]
    return Scope("py-agent", f"py-session-{tag}", session_key or f"py-store-{tag}", agent_run_id or f"py-run-{tag}")


class SessionStoreTest(ServiceTestCase):
    """Code mode's store(key, value) / load(key), and GetSessionStore / ClearSessionStore."""

    def test_store_then_load_across_execs_then_read_and_clear_it(self) -> None:
        run = self.client.open_run(store_scope(), tools=TOOLS, mcp_servers=[GITHUB])
        before = int(time.time() * 1000)
        first = run.exec("await store('k', {a: 1}); return await load('k')")
        self.assertEqual(first.status, Status.COMPLETED, first.model_json)
        self.assertEqual(first.value, {"a": 1})
        assert first.telemetry is not None and first.telemetry.session_store is not None
        use = first.telemetry.session_store
        self.assertEqual((use.loads, use.stores, use.keys_written, use.keys), (1, 1, 1, 1))
        self.assertEqual(use.bytes_written, len('{"a":1}'))
        self.assertGreaterEqual(use.bytes, use.bytes_written)
        # A later cell (committed before the first result was sent) sees it.
        second = run.exec("return await load('k')")
        self.assertEqual((second.status, second.value), (Status.COMPLETED, {"a": 1}), second.model_json)
        assert second.telemetry is not None and second.telemetry.session_store is not None
        self.assertEqual((second.telemetry.session_store.stores, second.telemetry.session_store.keys_written), (0, 0))
        # A cell that makes no store call has no session_store telemetry.
        plain = run.exec("return 1")
        assert plain.telemetry is not None
        self.assertIsNone(plain.telemetry.session_store)
        # Another agent run of the same session (agent id and session key) shares the store.
        s = run.scope
        other_turn = self.client.open_run(Scope(s.agent_id, s.session_id + "-b", s.session_key, s.agent_run_id + "-next"), tools=TOOLS, mcp_servers=[GITHUB])
        self.assertEqual(other_turn.exec("return await load('k')").value, {"a": 1})
        stranger = self.client.open_run(store_scope(), tools=TOOLS, mcp_servers=[GITHUB])
        self.assertEqual(stranger.exec("return [await load('k')]").value, [None])

        steps = run.trajectory()
        self.assertEqual([(st.session_keys_written, st.session_bytes_written) for st in steps[:2]], [(1, len('{"a":1}')), (0, 0)])

        kept = run.session_store()
        self.assertIsInstance(kept, SessionStore)
        self.assertEqual(kept.entries, {"k": {"a": 1}})
        self.assertEqual(kept.entries_json, {"k": '{"a":1}'})
        self.assertEqual(kept.keys, ["k"])
        self.assertEqual(kept.bytes, use.bytes)
        # Dropped 7 days (the default sessionTtlSeconds) after the last write.
        week = 7 * 24 * 3600 * 1000
        self.assertGreaterEqual(kept.expires_at_ms, before + week)
        self.assertLessEqual(kept.expires_at_ms, int(time.time() * 1000) + week)
        self.assertEqual(self.client.get_session_store(agent_id=s.agent_id, session_key=s.session_key), kept)
        self.assertEqual(self.client.get_session_store(other_turn.scope), kept)

        self.assertEqual(run.clear_session_store(), 1)
        self.assertEqual(run.session_store(), SessionStore(entries={}, entries_json={}, bytes=0, expires_at_ms=0))
        gone = run.exec("const v = await load('k'); return [typeof v, v === undefined, [v]]")
        self.assertEqual(gone.value, ["undefined", True, [None]], gone.model_json)
        self.assertEqual(self.client.clear_session_store(agent_id=s.agent_id, session_key=s.session_key), 0)
        with self.assertRaises(InvalidArgument):
            self.client.get_session_store(agent_id="", session_key="k")

    def test_a_failed_cells_writes_are_dropped_and_limits_and_the_switch_apply(self) -> None:
        run = self.client.open_run(store_scope(), tools=TOOLS, mcp_servers=[GITHUB], config=CodeModeConfig(max_session_keys=1))
        failed = run.exec("await store('x', 1); throw new Error('boom')")
        self.assertEqual(failed.status, Status.FAILED, failed.model_json)
        self.assertEqual(run.session_store().entries, {})
        over = run.exec("await store('a', 1); try { await store('b', 2) } catch (e) { return [e.name, e.message] }")
        self.assertEqual(over.status, Status.COMPLETED, over.model_json)
        self.assertEqual(over.value[0], "RangeError")
        self.assertIn("maxSessionKeys", over.value[1])
        self.assertEqual(run.session_store().entries, {"a": 1})
        off = self.client.open_run(store_scope(), tools=TOOLS, mcp_servers=[GITHUB], config=CodeModeConfig(session_store=False))
        self.assertEqual(off.exec("return [typeof store, typeof load]").value, ["undefined", "undefined"])
        self.assertEqual(run.clear_session_store(), 1)


class AwaitResultsTest(ServiceTestCase):
    """exec with await_results: a program parked on pending calls completes in the same call."""

    def answer_after(self, seconds: float, value: Any) -> tuple[Callable[[ToolCall], Any], list[threading.Timer], list[Run]]:
        """A handler that answers each call ``seconds`` later from a timer thread (ANSWER_LATER,
        then ``Run.answer``); the run to answer on goes into the returned list once opened."""
        timers: list[threading.Timer] = []
        runs: list[Run] = []

        def handler(call: ToolCall) -> Any:
            timer = threading.Timer(seconds, lambda: runs[0].answer(call.call_id, value))
            timers.append(timer)
            timer.start()
            return ANSWER_LATER

        return handler, timers, runs

    def test_a_tool_answering_after_the_timeout_completes_the_exec_without_a_wait(self) -> None:
        handler, timers, runs = self.answer_after(1.0, {"slow": True})
        run = self.open([ToolSpec("slow", "Answers after a second.")], on_tool_call=handler, mcp_servers=[], config=CodeModeConfig(timeout_ms=300))
        runs.append(run)
        code = "text('before'); const r = await tools.slow({}); text('after'); return r"
        started = time.monotonic()
        result = run.exec(code, exec_call_id="exec-await-1", await_results=True)
        elapsed = time.monotonic() - started
        for t in timers:
            t.join()
        self.assertEqual(result.status, Status.COMPLETED, result.model_json)
        self.assertEqual(result.value, {"slow": True})
        self.assertEqual([o.value for o in result.output], ["before", "after"])
        self.assertGreaterEqual(elapsed, 0.9)  # parked past its 300 ms timeout, then resumed
        self.assertEqual(len(result.tool_calls), 1)
        # No wait was called: every step is the exec's, a resume is recorded as a wait under its call id.
        steps = [(st.kind, st.call_id, st.status) for st in run.trajectory()]
        self.assertEqual(steps, [("exec", "exec-await-1", "waiting"), ("wait", "exec-await-1", "completed")])

        # The same program without await_results returns waiting at the deadline.
        timers.clear()
        plain = run.exec(code)
        self.assertEqual((plain.status, plain.reason), (Status.WAITING, WaitReason.PENDING_TOOLS), plain.model_json)
        for t in timers:
            t.join()
        assert plain.code_mode_run_id is not None
        self.assertEqual(run.wait(plain.code_mode_run_id).value, {"slow": True})

    def test_the_runs_await_results_is_the_default_and_max_await_ms_bounds_it(self) -> None:
        handler, timers, runs = self.answer_after(0.6, "late")
        tools = [ToolSpec("slow", "Answers later.")]
        run = self.open(tools, on_tool_call=handler, mcp_servers=[], config=CodeModeConfig(timeout_ms=300, await_results=True))
        runs.append(run)
        assert run.surface is not None
        self.assertIn("awaitResults", json.loads(run.surface.tools_json)[0]["input_schema"]["properties"])
        results = run.run_until_done("return await tools.slow({})")
        self.assertEqual([(r.status, r.value) for r in results], [(Status.COMPLETED, "late")])
        overridden = run.exec("return await tools.slow({})", await_results=False)
        self.assertEqual(overridden.status, Status.WAITING, overridden.model_json)
        for t in timers:
            t.join()
        off = self.open(tools, mcp_servers=[])
        assert off.surface is not None
        self.assertNotIn("awaitResults", json.loads(off.surface.tools_json)[0]["input_schema"]["properties"])
        # Nobody answers: after max_await_ms the exec returns waiting as any exec.
        never = self.open(tools, on_tool_call=lambda call: ANSWER_LATER, mcp_servers=[], config=CodeModeConfig(timeout_ms=300, max_await_ms=1000))
        started = time.monotonic()
        bounded = never.exec("return await tools.slow({})", await_results=True)
        self.assertEqual((bounded.status, bounded.reason), (Status.WAITING, WaitReason.PENDING_TOOLS), bounded.model_json)
        self.assertGreaterEqual(time.monotonic() - started, 0.9)
        self.assertEqual(never.close(), 1)


class NamespaceTest(ServiceTestCase):
    def test_internal_namespace(self) -> None:
        plugin = f"issues-plugin-{uuid.uuid4().hex[:6]}"
        calls: list[ToolCall] = []

        def handler(call: ToolCall) -> Any:
            calls.append(call)
            return {"tool": call.tool_name, "input": call.input}

        tools = [
            ToolSpec("issues_list", "List issues.", source=ToolSource.OPENCLAW, owner=plugin, origin=ToolOrigin.EXTERNAL_PLUGIN),
            ToolSpec("issues_update", "Update an issue.", source=ToolSource.OPENCLAW, owner=plugin, origin=ToolOrigin.EXTERNAL_PLUGIN),
        ]
        spec = NamespaceSpec(
            plugin_id=plugin,
            id=f"{plugin}.issues",
            global_name=f"Issues_{uuid.uuid4().hex[:6]}",
            description="Issue tracker.",
            prompt="Use it for issues.",
            required_tool_names=("issues_list", "issues_update"),
            scope={"repo": "openclaw", "list": ns_tool("issues_list"), "update": ns_tool("issues_update", ["number", "patch"]), "session": ns_context("sessionId")},
        )
        try:
            registered = self.client.register_namespace(spec)
            self.assertEqual((registered.callable_count, registered.replaced), (2, False))
            self.assertIn(spec, self.client.list_namespaces())
            run = self.open(tools, on_tool_call=handler, mcp_servers=[])
            assert run.surface is not None
            self.assertEqual(run.surface.namespaces, (spec.global_name,))
            self.assertIn(f"`{spec.global_name}`: Issue tracker. Use it for issues.", run.surface.tools[0].description)
            g = spec.global_name
            result = run.exec(f"return [{g}.repo, {g}.session, await {g}.list({{state: 'open'}}), await namespaces.{g}.update(5, {{title: 't'}})]")
            self.assertEqual(result.status, Status.COMPLETED, result.model_json)
            self.assertEqual(result.value[:2], ["openclaw", run.scope.session_id])
            self.assertEqual(result.value[2], {"tool": "issues_list", "input": {"state": "open"}})
            self.assertEqual(result.value[3], {"tool": "issues_update", "input": {"number": 5, "patch": {"title": "t"}}})
            self.assertEqual([c.tool_id for c in calls], [f"openclaw:{plugin}:issues_list", f"openclaw:{plugin}:issues_update"])
            with self.assertRaises(InvalidArgument) as refused:
                self.client.register_namespace(NamespaceSpec(plugin, f"{plugin}.bad", "JSON", {"x": ns_tool("issues_list")}, ("issues_list",)))
            self.assertIn("JSON", refused.exception.details)
        finally:
            self.assertEqual(self.client.clear_namespaces(plugin), 1)
        self.assertNotIn(spec, self.client.list_namespaces())


class ErrorMappingTest(ServiceTestCase):
    def test_grpc_statuses_become_typed_exceptions(self) -> None:
        never_opened = self.client.run(new_scope())
        with self.assertRaises(FailedPrecondition) as no_run:
            never_opened.exec("return 1")
        self.assertIn("call OpenRun first", no_run.exception.details)
        self.assertIsInstance(no_run.exception, CodeModeError)
        with self.assertRaises(FailedPrecondition):
            never_opened.wait("cm_x")
        with self.assertRaises(InvalidArgument) as no_scope:
            self.client.exec(Scope("", "", "", ""), "return 1")
        self.assertIn("scope", no_scope.exception.details)
        with self.assertRaises(InvalidArgument):
            self.client.put_catalog([ToolSpec("x", owner="not an owner")])
        with self.assertRaises(InvalidArgument):
            self.client.run(new_scope()).wait("x" * 300)  # over the 256-byte id limit
        run = self.open()
        with self.assertRaises(NotFound):
            run.answer("c_unknown", 1)
        # An answer for a call whose code-mode run already ended (here: deleted by CloseRun).
        parked = run.exec("return await tools.weather({city: 'x'})", config=CodeModeConfig(timeout_ms=150), on_tool_call=lambda call: ANSWER_LATER)
        self.assertEqual(parked.status, Status.WAITING, parked.model_json)
        self.assertEqual(run.close(), 1)
        with self.assertRaises(FailedPrecondition):
            run.answer(parked.pending_calls[0].call_id, 1)

    def test_unreachable_service_is_unavailable(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with CodeModeClient(orchestrator=f"127.0.0.1:{port}", sandbox=f"127.0.0.1:{port}") as dead:
            with self.assertRaises(Unavailable):
                dead.put_catalog([])
            with self.assertRaises(Unavailable):
                dead.exec(new_scope(), "return 1")


class _SpanSink(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP (JSON) receiver: keeps every span POSTed to /v1/traces as
    ``(name, trace_id, span_id, parent_span_id)`` with hex ids."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, str]] = []
        self.lock = threading.Lock()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.body()
                if self.path == "/v1/traces":
                    doc = json.loads(body or b"{}")
                    with sink.lock:
                        for rs in doc.get("resourceSpans", []):
                            for ss in rs.get("scopeSpans", []):
                                for sp in ss.get("spans", []):
                                    sink.spans.append((sp["name"], _hex(sp["traceId"]), _hex(sp["spanId"]), _hex(sp.get("parentSpanId") or "")))
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() != "chunked":  # Node's exporter sends chunks
                    return self.rfile.read(int(self.headers.get("content-length") or 0))
                out = b""
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    out += self.rfile.read(size)
                    self.rfile.readline()  # the CRLF after each chunk
                self.rfile.readline()  # the CRLF after the last (empty) chunk
                return out

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def span(self, span_id: str, timeout: float = 15) -> tuple[str, str, str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for s in self.spans:
                    if s[2] == span_id:
                        return s
            time.sleep(0.1)
        raise AssertionError(f"span {span_id} never exported; got {self.spans}")


def _hex(span_or_trace_id: str) -> str:
    """OTLP JSON ids are hex; tolerate base64 too."""
    text = span_or_trace_id.lower()
    if len(text) in (16, 32) and all(c in "0123456789abcdef" for c in text):
        return text
    return base64.b64decode(span_or_trace_id).hex() if span_or_trace_id else ""


class TracingTest(unittest.TestCase):
    """A second `codemode start` with tracing on (the standard OTEL_* variables, spans to a
    receiver in this test): the gateway's traceparent is honoured and handed back per call."""

    sink: ClassVar[_SpanSink]
    proc: ClassVar[subprocess.Popen[str]]
    log: ClassVar[Path]
    client: ClassVar[CodeModeClient]

    @classmethod
    def setUpClass(cls) -> None:
        cls.sink = _SpanSink()
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": cls.sink.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BSP_SCHEDULE_DELAY": "100"}
        cls.proc, sandbox, orchestrator, cls.log = start_service(env)
        cls.client = CodeModeClient(orchestrator=orchestrator, sandbox=sandbox)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        stop_service(cls.proc, cls.log)
        cls.sink.shutdown()
        cls.sink.server_close()

    def test_nested_calls_carry_the_gateways_trace(self) -> None:
        trace_id, exec_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
        run = self.client.open_run(new_scope("trace"), tools=TOOLS)
        first = run.exec(
            "const w = await tools.weather({city: 'Oslo'}); await yield_control('x'); return [w, await tools.weather({city: 'Lima'})]",
            metadata=[("traceparent", f"00-{trace_id}-{exec_span}-01"), ("tracestate", "vendor=gw")],
        )
        self.assertEqual(first.status, Status.WAITING, first.model_json)
        (call,) = first.tool_calls
        version, call_trace, call_span, flags = call.trace_parent.split("-")
        self.assertEqual((version, call_trace, flags), ("00", trace_id, "01"))
        self.assertNotEqual(call_span, exec_span)  # the sidecar's span for this call, not the gateway's
        self.assertEqual(call.trace_state, "vendor=gw")
        # The span it names was exported, in the gateway's trace, under the sidecar's exec span.
        name, exported_trace, _, parent = self.sink.span(call_span)
        self.assertEqual((name, exported_trace), ("codemode.tool_call", trace_id))
        self.assertEqual(self.sink.span(parent)[:2], ("codemode.exec", trace_id))

        wait_span = uuid.uuid4().hex[:16]
        assert first.code_mode_run_id is not None
        done = run.wait(first.code_mode_run_id, metadata=[("traceparent", f"00-{trace_id}-{wait_span}-01")])
        self.assertEqual(done.value, [{"city": "Oslo", "tempC": 4}, {"city": "Lima", "tempC": 4}], done.model_json)
        (later,) = done.tool_calls
        self.assertEqual(later.trace_parent.split("-")[1], trace_id)
        self.assertEqual(later.trace_state, "")  # the wait sent no tracestate

        # Without metadata the sidecar starts a trace of its own; the field is still filled.
        own = run.exec("return await tools.weather({city: 'x'})")
        self.assertNotIn(trace_id, own.tool_calls[0].trace_parent)
        self.assertRegex(own.tool_calls[0].trace_parent, r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$")


class ExampleGatewayTest(ServiceTestCase):
    def example(self, stdin: str) -> subprocess.CompletedProcess[str]:
        """Runs example_gateway.py, with ``stdin`` as the person's answer to its approval prompt."""
        return subprocess.run(
            [sys.executable, str(CLIENT_DIR / "example_gateway.py"), "--sandbox", self.sandbox, "--orchestrator", self.orchestrator],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def test_example_gateway_runs_to_completion(self) -> None:
        out = self.example("y\n")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        results = [json.loads(line) for line in out.stdout.splitlines()]
        self.assertEqual(results[0]["status"], "waiting")
        self.assertEqual(results[0]["pendingToolCalls"][0]["toolId"], "openclaw:core:build_report")
        self.assertEqual(results[-1]["status"], "completed")
        self.assertEqual(results[-1]["value"]["issue"], 42)
        self.assertEqual(results[-1]["value"]["missing"], "no weather station in Atlantis")
        self.assertIn("model tools: ['exec', 'wait']", out.stderr)
        self.assertIn('approve send_summary {"to":"team@example.com","text":"report: 3 rows"}? (sends an email on your behalf) [y/N]', out.stderr)
        self.assertEqual(results[-1]["value"]["sent"], {"sent_to": "team@example.com", "chars": 14})

    def test_example_gateway_denied_approval(self) -> None:
        out = self.example("n\n")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        final = json.loads(out.stdout.splitlines()[-1])
        self.assertEqual(final["status"], "completed")
        self.assertEqual(final["value"]["sent"], "ApprovalDenied: the person said no")


if __name__ == "__main__":
    unittest.main()
