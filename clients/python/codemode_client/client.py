"""The gateway client: Control on the orchestrator, Sandbox on one or more sidecars.

Call order (README, "Gateway walkthrough"): ``put_catalog``/``open_run`` on the
orchestrator, ``describe_surface`` for the model's tool definitions, then per model tool
call ``Run.exec`` / ``Run.wait`` on a sidecar, each nested ``ToolCallRequested`` answered
with ``BridgeCallback``, and ``Run.close`` at the end of the agent run.

Nested calls are answered on a thread pool, so parallel calls in the guest run in
parallel here and the event stream keeps being read. A handler that is still running when
the exec returns ``waiting`` answers when it finishes; the answer is kept with the
suspended run and delivered by the next ``wait``. A call that needs a person's approval is
answered "approval pending" first (``NeedsApproval``), then decided: approved with the
tool's result, or denied (``approve``/``deny``, or an ``Approver`` on the pool). An answer
may be marked secret (``secret=True``, a handler's ``Secret``, ``ToolSpec(secret=True)``): the
run's replay record then keeps that the call was answered, not with what. ``replay`` re-runs a
recorded code-mode run and reports whether it behaved the same (docs/replay.md).
"""
from __future__ import annotations

import itertools
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

from ._proto import common_pb2, control_pb2, control_pb2_grpc, sandbox_pb2, sandbox_pb2_grpc
from .errors import CodeModeError, ToolFailure, Unavailable, from_rpc_error
from .models import (
    Catalog,
    CodeModeConfig,
    ExecResult,
    McpServerSpec,
    NamespaceSpec,
    OutputItem,
    Policy,
    RawJson,
    ReplayReport,
    Scope,
    SessionStore,
    Surface,
    ToolCall,
    ToolSource,
    ToolSpec,
    TrajectoryStep,
)

log = logging.getLogger("codemode_client")


class _AnswerLater:
    """Returned by a handler that will answer the call itself, later (``Run.answer``)."""

    _instance: _AnswerLater | None = None

    def __new__(cls) -> _AnswerLater:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANSWER_LATER"


ANSWER_LATER: Final = _AnswerLater()

Decision = bool | str | _AnswerLater
"""A person's decision on a call that needs approval: True approves it (the tool runs and its
result answers the call), False denies it with a default message, a string denies it with
that message, ``ANSWER_LATER`` leaves it to ``Run.approve``/``Run.deny`` later."""

Approver = Callable[[ToolCall, str], Decision]
"""Asks a person about one call (``ToolCall``, the reason) and returns the ``Decision``. It
runs on the client's thread pool after the approval-pending answer was sent, so it may block
while the person thinks (the exec may meanwhile return ``waiting`` with reason
``approval``; the decision then waits with the suspended run for the next ``wait``)."""

DEFAULT_DENIAL = "a person denied this call"


@dataclass(frozen=True)
class NeedsApproval:
    """Returned by a handler: the call needs a person's approval first. The client answers
    "approval pending" with ``reason`` (and ``expires_at_ms``, epoch ms; None: the run's
    ``approval_timeout_ms`` from now), then, when ``decide`` is given, calls it on the pool
    and answers with ``run()``'s result if approved or a denial otherwise. Without
    ``decide`` the decision is left to ``Run.approve``/``Run.deny`` (or ``fail``) later.
    With the run's ``approval_mode`` ``"error"`` nobody is asked: the guest's call fails at
    once with ``ApprovalRequired``."""

    reason: str = ""
    expires_at_ms: int | None = None
    decide: Callable[[], Decision] | None = field(default=None, compare=False)
    run: Callable[[], Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.decide is not None and self.run is None:
            raise ValueError("NeedsApproval with decide= needs run= (what an approved call answers)")


@dataclass(frozen=True)
class Secret:
    """Returned by a handler: answer the call with ``value``, marked secret
    (``BridgeCallbackRequest.secret``). The run's replay record keeps that the call was
    answered, and whether with a result or an error, but not with what; a replay stops there
    (verdict ``incomplete``, naming the call). ``value`` is anything a handler may return: a
    result or ``RawJson``; an exception, which fails the call as raising it would;
    ``NeedsApproval``, whose decision (the approved result, or the denial) is sent secret
    (the approval-pending answer carries no result and is sent as usual); or
    ``ANSWER_LATER`` (then pass ``secret=True`` to ``Run.answer``/``fail`` yourself).
    ``ToolSpec(secret=True)`` makes ``dispatch`` wrap every answer of that tool so."""

    value: Any


ToolHandler = Callable[[ToolCall], Any]
"""Runs one nested call. Returns the tool's result (any JSON-compatible value, a ``RawJson``,
``ANSWER_LATER``, ``NeedsApproval`` or ``Secret``); raising fails the call (``ToolFailure``
sets the error name)."""

OutputHandler = Callable[[OutputItem], None]
Metadata = Sequence[tuple[str, str]]
"""gRPC metadata sent with an Exec or Wait, e.g. ``[("traceparent", "00-<trace>-<span>-01")]``
(keys lower-case, as gRPC requires)."""
AnswerErrorHandler = Callable[[ToolCall, Exception], None]


def dispatch(tools: Iterable[ToolSpec], approver: Approver | None = None) -> ToolHandler:
    """A ToolHandler that routes each call to its ToolSpec's ``handler`` (by source, owner
    and name, as in the catalog id) with the parsed input. A ToolSpec with ``needs_approval``
    returns ``NeedsApproval`` instead: ``approver`` decides (without one, the decision is
    left to ``Run.approve``/``Run.deny``), and ``handler`` runs only once approved. A ToolSpec
    with ``secret`` has every answer wrapped in ``Secret``: its result, the error its handler
    raised, and a person's decision are all sent secret."""
    table: dict[tuple[ToolSource, str, str], ToolSpec] = {}
    for tool in tools:
        if tool.handler is not None:
            table[(tool.source, tool.effective_owner, tool.name)] = tool

    def handle(call: ToolCall) -> Any:
        tool = table.get((call.source, call.source_name, call.tool_name))
        if tool is None or tool.handler is None:
            raise ToolFailure(f"the gateway has no handler for {call.tool_id}", name="ToolUnavailable")
        answer = route(tool, tool.handler, call)
        return Secret(answer) if tool.secret else answer

    def route(tool: ToolSpec, handler: Callable[[Any], Any], call: ToolCall) -> Any:
        reason = tool.approval_reason
        if reason is None:
            # A secret tool's error is secret too: what it raised is caught here, inside the Secret.
            return _run_tool(lambda: handler(call.input)) if tool.secret else handler(call.input)
        if approver is None:
            return NeedsApproval(reason)
        ask, why = approver, reason
        return NeedsApproval(why, decide=lambda: ask(call, why), run=lambda: handler(call.input))

    return handle


def _no_handler(call: ToolCall) -> Any:
    raise ToolFailure(f"the gateway has no handler for {call.tool_id}", name="ToolUnavailable")


@dataclass(frozen=True)
class NamespaceRegistered:
    callable_count: int
    replaced: bool


class CodeModeClient:
    """Connects to the orchestrator (Control) and to sandbox sidecars (Sandbox).

    ``sandbox`` is one address or several; execs and waits go round-robin over them unless
    a call names ``sidecar=<index>``. A nested call's answer may go to any sidecar of the
    deployment: for a live run, the orchestrator forwards it to the sidecar holding the VM;
    for a suspended run, it is kept with the run. This client answers on the sidecar whose
    stream announced the call first (that saves the forwarding hop) and tries the others
    when that one is unavailable.
    """

    def __init__(
        self,
        orchestrator: str,
        sandbox: str | Sequence[str],
        *,
        max_message_bytes: int = 16 * 1024 * 1024,
        callback_threads: int = 32,
        on_answer_error: AnswerErrorHandler | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        addresses = [sandbox] if isinstance(sandbox, str) else list(sandbox)
        if not addresses:
            raise ValueError("at least one sandbox address is needed")
        # Results carry the output twice (fields and model_json): a gateway that raises
        # maxOutputBytes past ~1.5 MiB needs a receive limit above gRPC's default 4 MiB.
        options = [("grpc.max_receive_message_length", max_message_bytes), ("grpc.max_send_message_length", max_message_bytes)]

        def channel(address: str) -> grpc.Channel:
            if credentials is not None:
                return grpc.secure_channel(address, credentials, options=options)
            return grpc.insecure_channel(address, options=options)

        self._control_channel = channel(orchestrator)
        self._control = control_pb2_grpc.ControlStub(self._control_channel)  # type: ignore[no-untyped-call]
        self._sandbox_channels = [channel(a) for a in addresses]
        self._sandboxes = [sandbox_pb2_grpc.SandboxStub(c) for c in self._sandbox_channels]  # type: ignore[no-untyped-call]
        self._next_sidecar = itertools.count()
        self._pool = ThreadPoolExecutor(max_workers=callback_threads, thread_name_prefix="codemode-tool")
        self._lock = threading.Lock()
        self._inflight: set[Future[None]] = set()
        # call id -> index of the sidecar whose stream announced it (answers go there first).
        self._call_sidecar: dict[str, int] = {}
        # scope -> the approval_mode its OpenRun config set (an "error" run asks nobody).
        self._approval_modes: dict[Scope, str] = {}
        self._on_answer_error = on_answer_error
        self._closed = False

    # --- Control (orchestrator) -----------------------------------------------------------

    def put_catalog(self, tools: Sequence[ToolSpec], mcp_servers: Sequence[McpServerSpec] = ()) -> Catalog:
        """Stores a catalog under its content address (the same tools give the same id)."""
        req = control_pb2.PutCatalogRequest(tools=[t.to_wire() for t in tools], mcp_servers=[s.to_wire() for s in mcp_servers])
        res = self._unary(self._control.PutCatalog, req)
        return Catalog(catalog_id=res.catalog_id, tool_count=res.tool_count)

    def open_run(
        self,
        scope: Scope,
        *,
        tools: Sequence[ToolSpec] | None = None,
        mcp_servers: Sequence[McpServerSpec] = (),
        catalog_id: str | None = None,
        policy: Policy | None = None,
        config: CodeModeConfig | None = None,
        disable_tools: bool = False,
        on_tool_call: ToolHandler | None = None,
        approver: Approver | None = None,
    ) -> Run:
        """Opens (or replaces) the run for ``scope``, with tools sent inline or a catalog id
        from ``put_catalog``. ``on_tool_call`` is the run's default handler; without one, the
        ToolSpecs' own handlers answer (``dispatch``, with ``approver`` deciding the calls of
        tools that have ``needs_approval``)."""
        if (tools is None) == (catalog_id is None):
            raise ValueError("open_run needs exactly one of tools= or catalog_id=")
        req = control_pb2.OpenRunRequest(scope=scope.to_wire(), disable_tools=disable_tools)
        if catalog_id is not None:
            req.catalog_id = catalog_id
        else:
            req.tools.CopyFrom(control_pb2.InlineCatalog(tools=[t.to_wire() for t in tools or ()], mcp_servers=[s.to_wire() for s in mcp_servers]))
        if policy is not None:
            req.policy.CopyFrom(policy.to_wire())
        if config is not None:
            req.config.CopyFrom(config.to_wire())
        res = self._unary(self._control.OpenRun, req)
        with self._lock:
            if config is not None and config.approval_mode is not None:
                self._approval_modes[scope] = config.approval_mode
            else:
                self._approval_modes.pop(scope, None)
        handler = on_tool_call if on_tool_call is not None else (dispatch(tools, approver) if tools is not None else None)
        return Run(self, scope, handler, catalog_id=res.catalog_id, surface=Surface.from_wire(res.surface))

    def run(self, scope: Scope, on_tool_call: ToolHandler | None = None) -> Run:
        """A handle on the run of ``scope`` without opening it (e.g. in another gateway process
        that continues a model turn: ``wait`` and ``answer`` need only the scope)."""
        return Run(self, scope, on_tool_call)

    def describe_surface(self, scope: Scope) -> Surface:
        res = self._unary(self._control.DescribeSurface, control_pb2.DescribeSurfaceRequest(scope=scope.to_wire()))
        return Surface.from_wire(res.surface)

    def trajectory(self, scope: Scope) -> list[TrajectoryStep]:
        res = self._unary(self._control.GetTrajectory, control_pb2.GetTrajectoryRequest(scope=scope.to_wire()))
        return [TrajectoryStep.from_wire(s) for s in res.steps]

    def close_run(self, scope: Scope) -> int:
        """Closes the run; returns how many suspended code-mode runs were deleted."""
        res = self._unary(self._control.CloseRun, control_pb2.CloseRunRequest(scope=scope.to_wire()))
        with self._lock:
            self._approval_modes.pop(scope, None)
        return int(res.suspended_runs_deleted)

    def register_namespace(self, spec: NamespaceSpec) -> NamespaceRegistered:
        """Registers (or replaces) an internal namespace; refused whole with InvalidArgument."""
        res = self._unary(self._control.RegisterNamespace, control_pb2.RegisterNamespaceRequest(namespace=spec.to_wire()))
        return NamespaceRegistered(callable_count=res.callable_count, replaced=res.replaced)

    def clear_namespaces(self, plugin_id: str) -> int:
        res = self._unary(self._control.ClearNamespaces, control_pb2.ClearNamespacesRequest(plugin_id=plugin_id))
        return int(res.cleared)

    def list_namespaces(self) -> list[NamespaceSpec]:
        res = self._unary(self._control.ListNamespaces, control_pb2.ListNamespacesRequest())
        return [NamespaceSpec.from_wire(n) for n in res.namespaces]

    def get_session_store(self, scope: Scope | None = None, *, agent_id: str | None = None, session_key: str | None = None) -> SessionStore:
        """A session's store (code mode's ``store``/``load``) as committed. The session is the
        ``scope``'s ``agent_id`` and ``session_key`` (its session_id and agent_run_id play no
        part: every agent run of the session shares the store), or, without a scope, the
        ``agent_id`` and ``session_key`` given. An empty one is ``InvalidArgument``."""
        agent, key = _session_of(scope, agent_id, session_key)
        res = self._unary(self._control.GetSessionStore, control_pb2.GetSessionStoreRequest(agent_id=agent, session_key=key))
        return SessionStore.from_wire(res)

    def clear_session_store(self, scope: Scope | None = None, *, agent_id: str | None = None, session_key: str | None = None) -> int:
        """Deletes a session's store (a user who asks to be forgotten), named as for
        ``get_session_store``; returns how many keys it held."""
        agent, key = _session_of(scope, agent_id, session_key)
        res = self._unary(self._control.ClearSessionStore, control_pb2.ClearSessionStoreRequest(agent_id=agent, session_key=key))
        return int(res.keys_deleted)

    def replay_record(self, scope: Scope, code_mode_run_id: str) -> str:
        """A recorded code-mode run's replay record, as JSON (``GetReplayRecord``; what
        ``codemode replay --export`` writes): its exec and wait segments in order, each with its
        program or resume, config, clock and random reads, answers and result (docs/replay.md,
        "The record"; a secret answer is kept only as answered). The run is named by the scope
        its exec ran under and its ``code_mode_run_id`` (``ExecResult.code_mode_run_id``);
        another scope's run, or one not recorded (``record_for_replay=False``), is ``NotFound``."""
        req = control_pb2.GetReplayRecordRequest(scope=scope.to_wire(), code_mode_run_id=code_mode_run_id)
        res = self._unary(self._control.GetReplayRecord, req)
        return str(res.record_json)

    def replay(self, scope: Scope | None = None, code_mode_run_id: str | None = None, *, record_json: str | None = None) -> ReplayReport:
        """Re-runs a recorded code-mode run in fresh VMs with its recorded answers, calling no
        tool (``ReplayRun``), and reports ``same``, where it first ``diverged``, or where it
        stopped (``incomplete``: a secret answer, a capped record). The run is the one the
        orchestrator recorded (``scope`` and ``code_mode_run_id``, as for ``replay_record``)
        or a record given whole (``record_json``: ``replay_record``'s text, edited or moved
        from another deployment). Naming it both ways, or neither, is a ``ValueError``; a
        record that does not parse is ``InvalidArgument``."""
        if record_json is not None:
            if scope is not None or code_mode_run_id is not None:
                raise ValueError("replay a run named by scope and code_mode_run_id, or one given as record_json=, not both")
            if not record_json:
                raise ValueError("record_json is empty")
            req = control_pb2.ReplayRunRequest(record_json=record_json)
        else:
            if scope is None or code_mode_run_id is None:
                raise ValueError("replay needs a scope and a code_mode_run_id, or record_json=")
            req = control_pb2.ReplayRunRequest(scope=scope.to_wire(), code_mode_run_id=code_mode_run_id)
        return ReplayReport.from_wire(self._unary(self._control.ReplayRun, req))

    # --- Sandbox (sidecars) ---------------------------------------------------------------

    def exec(
        self,
        scope: Scope,
        code: str | None = None,
        *,
        language: str | None = None,
        command: str | None = None,
        exec_call_id: str | None = None,
        config: CodeModeConfig | None = None,
        on_tool_call: ToolHandler | None = None,
        on_output: OutputHandler | None = None,
        sidecar: int | None = None,
        metadata: Metadata | None = None,
        await_results: bool | None = None,
    ) -> ExecResult:
        """Runs the model's ``exec`` input on a sidecar and returns its result. ``code``,
        ``command`` and ``language`` are passed as the model gave them (a bad value is a
        ``failed``/``invalid_input`` result, not an exception). ``metadata`` goes with the
        call: W3C ``traceparent``/``tracestate`` make the sidecar's spans children of the
        gateway's (each ``ToolCall.trace_parent`` then names its nested span).
        ``await_results`` (the model's ``awaitResults``; None: the run's config, default
        False): a program parked on pending tool calls does not end the exec with
        ``waiting``; the call stays open, resumes the program as answers arrive, and returns
        when it completes or fails, or ``waiting`` after ``max_await_ms`` or when the run
        parks for a person's approval."""
        req = sandbox_pb2.ExecRequest(scope=scope.to_wire(), exec_call_id=exec_call_id or _new_id("exec"))
        if code is not None:
            req.code = code
        if command is not None:
            req.command = command
        if language is not None:
            req.language = language
        if config is not None:
            req.config.CopyFrom(config.to_wire())
        if await_results is not None:
            req.await_results = await_results
        index = self._pick(sidecar)
        mode = config.approval_mode if config is not None else None
        return self._follow(scope, index, lambda: self._sandboxes[index].Exec(req, metadata=_metadata(metadata)), on_tool_call, on_output, mode)

    def wait(
        self,
        scope: Scope,
        code_mode_run_id: str,
        *,
        wait_call_id: str | None = None,
        on_tool_call: ToolHandler | None = None,
        on_output: OutputHandler | None = None,
        sidecar: int | None = None,
        metadata: Metadata | None = None,
    ) -> ExecResult:
        """Continues a ``waiting`` run (the model's ``wait`` with ``runId``) on any sidecar.
        Blocks up to the run's ``timeoutMs`` for a first answer when none is there yet.
        ``metadata`` as for ``exec``."""
        req = sandbox_pb2.WaitRequest(scope=scope.to_wire(), wait_call_id=wait_call_id or _new_id("wait"), code_mode_run_id=code_mode_run_id)
        index = self._pick(sidecar)
        return self._follow(scope, index, lambda: self._sandboxes[index].Wait(req, metadata=_metadata(metadata)), on_tool_call, on_output)

    def answer(self, scope: Scope, call_id: str, value: Any = None, *, sidecar: int | None = None, secret: bool = False) -> bool:
        """Answers a nested call with its result (JSON-compatible value or ``RawJson``).
        Returns ``delivered_live``: False when the answer was kept with a suspended run.
        ``secret``: the run's replay record keeps that the call was answered, not with what
        (a replay stops there, ``incomplete``)."""
        return self._bridge(scope, call_id, _result_outcome(value), sidecar, secret)

    def fail(self, scope: Scope, call_id: str, message: str, *, name: str = "Error", sidecar: int | None = None, secret: bool = False) -> bool:
        """Fails a nested call: the guest gets a catchable Error with ``name`` and ``message``.
        ``secret`` as for ``answer`` (the record keeps that the call failed, not how)."""
        return self._bridge(scope, call_id, ("error", common_pb2.ToolError(name=name, message=message)), sidecar, secret)

    def request_approval(self, scope: Scope, call_id: str, reason: str = "", *, expires_at_ms: int | None = None, sidecar: int | None = None) -> bool:
        """Answers a nested call "approval pending": a person is being asked. The call stays
        pending until ``approve``/``deny``/``fail`` or the expiry (epoch ms on the sidecar's
        clock; None: the run's ``approval_timeout_ms`` from now, later values are clamped to
        it, a past one is ``InvalidArgument``). A second request for the same call is
        ``AlreadyExists``. Returns ``delivered_live``."""
        return self._bridge(scope, call_id, _pending_outcome(reason, expires_at_ms), sidecar)

    def approve(self, scope: Scope, call_id: str, value: Any = None, *, sidecar: int | None = None, secret: bool = False) -> bool:
        """Approves a call that awaits approval by answering it with the tool's result: run the
        tool first, then pass its result here (the same as ``answer``, ``secret`` included).
        After the expiry it is ``FailedPrecondition``; a second decision ``AlreadyExists``."""
        return self.answer(scope, call_id, value, sidecar=sidecar, secret=secret)

    def deny(self, scope: Scope, call_id: str, message: str = DEFAULT_DENIAL, *, sidecar: int | None = None, secret: bool = False) -> bool:
        """Denies a call that awaits approval: the guest gets a catchable Error named
        ``ApprovalDenied`` with ``message``. ``secret`` as for ``answer``."""
        return self._bridge(scope, call_id, ("approval_denied", common_pb2.ApprovalDenied(message=message)), sidecar, secret)

    def join_answers(self, timeout: float | None = None) -> bool:
        """Blocks until every handler started so far has run and its answer was sent.
        Returns False when ``timeout`` (seconds) ran out first."""
        with self._lock:
            pending = list(self._inflight)
        if not pending:
            return True
        _, not_done = wait_futures(pending, timeout=timeout)
        return not not_done

    def close(self) -> None:
        """Waits for handlers still answering, then closes the channels."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        for ch in (self._control_channel, *self._sandbox_channels):
            ch.close()

    def __enter__(self) -> CodeModeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ------------------------------------------------------------------------

    def _pick(self, sidecar: int | None) -> int:
        if sidecar is not None:
            if not 0 <= sidecar < len(self._sandboxes):
                raise IndexError(f"sidecar {sidecar} out of range (0..{len(self._sandboxes) - 1})")
            return sidecar
        return next(self._next_sidecar) % len(self._sandboxes)

    def _unary(self, method: Callable[[Any], Any], request: Any) -> Any:
        try:
            return method(request)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def _follow(
        self,
        scope: Scope,
        index: int,
        start: Callable[[], Any],  # opens the Exec or Wait stream: an iterator of ExecEvent
        on_tool_call: ToolHandler | None,
        on_output: OutputHandler | None,
        approval_mode: str | None = None,
    ) -> ExecResult:
        handler = on_tool_call or _no_handler
        if approval_mode is None:
            with self._lock:
                approval_mode = self._approval_modes.get(scope)
        asks = approval_mode != "error"
        calls: list[ToolCall] = []
        result: common_pb2.Result | None = None
        stream = start()
        try:
            for event in stream:
                kind = event.WhichOneof("event")
                if kind == "tool_call":
                    call = ToolCall.from_wire(event.tool_call)
                    calls.append(call)
                    with self._lock:
                        self._call_sidecar[call.call_id] = index
                    self._start_handler(scope, call, handler, asks)
                elif kind == "output" and on_output is not None:
                    on_output(OutputItem.from_wire(event.output))
                elif kind == "result":
                    result = event.result
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            if result is None and isinstance(stream, grpc.RpcContext):
                stream.cancel()
        if result is None:
            raise CodeModeError("the stream ended without a Result", grpc.StatusCode.INTERNAL)
        return ExecResult.from_wire(result, calls)

    def _start_handler(self, scope: Scope, call: ToolCall, handler: ToolHandler, asks: bool) -> None:
        future = self._pool.submit(self._handle, scope, call, handler, asks)
        with self._lock:
            self._inflight.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[None]) -> None:
        with self._lock:
            self._inflight.discard(future)

    def _handle(self, scope: Scope, call: ToolCall, handler: ToolHandler, asks: bool) -> None:
        value, secret = _unwrap_secret(_run_tool(lambda: handler(call)))
        if isinstance(value, NeedsApproval):
            decided, secret_decision = _unwrap_secret(self._approval(scope, call, value, asks))
            value, secret = decided, secret or secret_decision
        if value is ANSWER_LATER:
            return
        if not isinstance(value, _Outcome):
            result = value
            value = _run_tool(lambda: _Outcome(_result_outcome(result)))  # a value that is not JSON fails the call
        self._send(scope, call, value.outcome, secret)

    def _approval(self, scope: Scope, call: ToolCall, request: NeedsApproval, asks: bool) -> Any:
        """Sends the approval-pending answer, then asks; returns what answers the call (a
        result or an ``_Outcome``), or ``ANSWER_LATER`` when nothing is to be sent now."""
        # The person is asked only once the sidecar knows the call awaits approval.
        if not self._send(scope, call, _pending_outcome(request.reason, request.expires_at_ms)):
            return ANSWER_LATER
        if request.decide is None or not asks:
            return ANSWER_LATER  # decided later (approve/deny), or approval_mode "error": nobody to ask
        decision = _run_tool(request.decide)
        if decision is ANSWER_LATER or isinstance(decision, _Outcome):
            return decision
        if decision is True:
            assert request.run is not None
            value = _run_tool(request.run)
            inner, _ = _unwrap_secret(value)
            if inner is ANSWER_LATER or isinstance(inner, NeedsApproval):
                return _Outcome(("error", common_pb2.ToolError(name="TypeError", message="an approved call must answer with the tool's result")))
            return value
        if decision is False or isinstance(decision, str):
            message = decision if isinstance(decision, str) else DEFAULT_DENIAL
            return _Outcome(("approval_denied", common_pb2.ApprovalDenied(message=message)))
        return _Outcome(("error", common_pb2.ToolError(name="TypeError", message=f"the approver returned {decision!r}, not a Decision")))

    def _send(self, scope: Scope, call: ToolCall, outcome: tuple[str, Any], secret: bool = False) -> bool:
        """Sends one answer for a handler; reports a refusal (on_answer_error or the log)."""
        try:
            self._bridge(scope, call.call_id, outcome, None, secret)
            return True
        except Exception as err:
            if self._on_answer_error is not None:
                self._on_answer_error(call, err)
            else:
                log.warning("could not answer nested call %s (%s): %s", call.call_id, call.tool_id, err)
            return False

    def _bridge(self, scope: Scope, call_id: str, outcome: tuple[str, Any], sidecar: int | None, secret: bool = False) -> bool:
        kind, payload = outcome
        # An approval-pending answer holds no result: it is never secret (the service ignores the flag on it).
        req = sandbox_pb2.BridgeCallbackRequest(scope=scope.to_wire(), call_id=call_id, secret=secret and kind != "approval_pending")
        if kind == "result_json":
            req.result_json = payload
        else:
            getattr(req, kind).CopyFrom(payload)
        # An approval-pending answer is not the last one: the decision still goes there first.
        settles = kind != "approval_pending"
        with self._lock:
            announced = self._call_sidecar.get(call_id)
        first = sidecar if sidecar is not None else (announced if announced is not None else 0)
        order = [first] + [i for i in range(len(self._sandboxes)) if i != first]
        last: CodeModeError | None = None
        for i in order if sidecar is None else [first]:
            try:
                res = self._sandboxes[i].BridgeCallback(req)
            except grpc.RpcError as err:
                last = from_rpc_error(err)
                if isinstance(last, Unavailable):
                    continue  # any sidecar accepts an answer (live runs' answers are forwarded)
                if settles:
                    with self._lock:
                        self._call_sidecar.pop(call_id, None)  # answered, settled or unknown: done with it
                raise last from None
            if settles:
                with self._lock:
                    self._call_sidecar.pop(call_id, None)
            return bool(res.delivered_live)
        assert last is not None
        raise last


class Run:
    """One agent run's code mode: its scope plus a default tool handler."""

    def __init__(self, client: CodeModeClient, scope: Scope, on_tool_call: ToolHandler | None, *, catalog_id: str = "", surface: Surface | None = None) -> None:
        self.client = client
        self.scope = scope
        self.on_tool_call = on_tool_call
        self.catalog_id = catalog_id
        # The surface OpenRun returned (None for a handle from CodeModeClient.run).
        self.surface = surface

    def describe_surface(self) -> Surface:
        """The exact tool definitions to send to the model (``Surface.tools_json``)."""
        return self.client.describe_surface(self.scope)

    def exec(
        self,
        code: str | None = None,
        *,
        language: str | None = None,
        command: str | None = None,
        exec_call_id: str | None = None,
        config: CodeModeConfig | None = None,
        on_tool_call: ToolHandler | None = None,
        on_output: OutputHandler | None = None,
        sidecar: int | None = None,
        metadata: Metadata | None = None,
        await_results: bool | None = None,
    ) -> ExecResult:
        return self.client.exec(
            self.scope,
            code,
            language=language,
            command=command,
            exec_call_id=exec_call_id,
            config=config,
            on_tool_call=on_tool_call or self.on_tool_call,
            on_output=on_output,
            sidecar=sidecar,
            metadata=metadata,
            await_results=await_results,
        )

    def wait(
        self,
        code_mode_run_id: str,
        *,
        wait_call_id: str | None = None,
        on_tool_call: ToolHandler | None = None,
        on_output: OutputHandler | None = None,
        sidecar: int | None = None,
        metadata: Metadata | None = None,
    ) -> ExecResult:
        return self.client.wait(
            self.scope,
            code_mode_run_id,
            wait_call_id=wait_call_id,
            on_tool_call=on_tool_call or self.on_tool_call,
            on_output=on_output,
            sidecar=sidecar,
            metadata=metadata,
        )

    def run_until_done(
        self,
        code: str,
        *,
        language: str | None = None,
        max_waits: int = 20,
        on_tool_call: ToolHandler | None = None,
        on_result: Callable[[ExecResult], None] | None = None,
        metadata: Metadata | None = None,
        await_results: bool | None = None,
    ) -> list[ExecResult]:
        """exec, then ``wait`` while the result is ``waiting`` (at most ``max_waits`` times), as
        a model following ``runId`` would. Returns every segment's result, the last one final
        unless the bound was reached (then it is still ``waiting``). ``metadata`` goes with
        every call; ``await_results`` with the exec."""
        results = [self.exec(code, language=language, on_tool_call=on_tool_call, metadata=metadata, await_results=await_results)]
        if on_result is not None:
            on_result(results[-1])
        while results[-1].waiting and len(results) <= max_waits:
            run_id = results[-1].code_mode_run_id
            assert run_id is not None
            results.append(self.wait(run_id, on_tool_call=on_tool_call, metadata=metadata))
            if on_result is not None:
                on_result(results[-1])
        return results

    def answer(self, call_id: str, value: Any = None, *, sidecar: int | None = None, secret: bool = False) -> bool:
        """Answers a nested call (e.g. one a handler deferred with ``ANSWER_LATER``);
        ``secret``: the replay record keeps only that it was answered."""
        return self.client.answer(self.scope, call_id, value, sidecar=sidecar, secret=secret)

    def fail(self, call_id: str, message: str, *, name: str = "Error", sidecar: int | None = None, secret: bool = False) -> bool:
        return self.client.fail(self.scope, call_id, message, name=name, sidecar=sidecar, secret=secret)

    def request_approval(self, call_id: str, reason: str = "", *, expires_at_ms: int | None = None, sidecar: int | None = None) -> bool:
        """Answers a call "approval pending" (``CodeModeClient.request_approval``)."""
        return self.client.request_approval(self.scope, call_id, reason, expires_at_ms=expires_at_ms, sidecar=sidecar)

    def approve(self, call_id: str, value: Any = None, *, sidecar: int | None = None, secret: bool = False) -> bool:
        """Approves a call that awaits approval with the tool's result (run the tool first)."""
        return self.client.approve(self.scope, call_id, value, sidecar=sidecar, secret=secret)

    def deny(self, call_id: str, message: str = DEFAULT_DENIAL, *, sidecar: int | None = None, secret: bool = False) -> bool:
        """Denies a call that awaits approval: the guest gets a catchable ``ApprovalDenied``."""
        return self.client.deny(self.scope, call_id, message, sidecar=sidecar, secret=secret)

    def trajectory(self) -> list[TrajectoryStep]:
        return self.client.trajectory(self.scope)

    def session_store(self) -> SessionStore:
        """The store of this run's session (its scope's agent_id and session_key)."""
        return self.client.get_session_store(self.scope)

    def clear_session_store(self) -> int:
        """Deletes the store of this run's session; returns how many keys it held."""
        return self.client.clear_session_store(self.scope)

    def replay_record(self, code_mode_run_id: str) -> str:
        """The replay record (JSON) of one of this run's code-mode runs (``CodeModeClient.replay_record``)."""
        return self.client.replay_record(self.scope, code_mode_run_id)

    def replay(self, code_mode_run_id: str) -> ReplayReport:
        """Replays one of this run's recorded code-mode runs (``CodeModeClient.replay``)."""
        return self.client.replay(self.scope, code_mode_run_id)

    def close(self) -> int:
        """CloseRun: drops the run's suspended snapshots and trajectory."""
        return self.client.close_run(self.scope)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _Outcome:
    """An answer that is not the tool's result: an error or a denial (a handler's plain
    tuple result stays a JSON array)."""

    outcome: tuple[str, Any]


def _run_tool(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the error ``_Outcome`` of what it raised (the guest sees name and
    message, never a host stack)."""
    try:
        return fn()
    except Exception as err:
        return _failure_outcome(err)


def _failure_outcome(err: Exception) -> _Outcome:
    if isinstance(err, ToolFailure):
        return _Outcome(("error", common_pb2.ToolError(name=err.name, message=err.message)))
    return _Outcome(("error", common_pb2.ToolError(name=type(err).__name__, message=str(err))))


def _unwrap_secret(value: Any) -> tuple[Any, bool]:
    """A handler's answer without its ``Secret`` wrapping, and whether it had one (an
    exception inside one fails the call, as raising it would)."""
    secret = False
    while isinstance(value, Secret):
        value, secret = value.value, True
    if secret and isinstance(value, Exception):
        value = _failure_outcome(value)
    return value, secret


def _pending_outcome(reason: str, expires_at_ms: int | None) -> tuple[str, Any]:
    return ("approval_pending", common_pb2.ApprovalPending(reason=reason, expires_at_ms=expires_at_ms or 0))


def _result_outcome(value: Any) -> tuple[str, Any]:
    if isinstance(value, RawJson):
        return ("result_json", value.text)
    return ("result_json", json.dumps(value, allow_nan=False))


def _session_of(scope: Scope | None, agent_id: str | None, session_key: str | None) -> tuple[str, str]:
    """The (agent_id, session_key) naming a session store: the scope's, or the two given."""
    if scope is not None:
        if agent_id is not None or session_key is not None:
            raise ValueError("name the session by a scope or by agent_id= and session_key=, not both")
        return scope.agent_id, scope.session_key
    if agent_id is None or session_key is None:
        raise ValueError("a session store needs a scope, or agent_id= and session_key=")
    return agent_id, session_key


def _metadata(metadata: Metadata | None) -> tuple[tuple[str, str], ...] | None:
    return tuple((k, v) for k, v in metadata) if metadata else None


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"
