"""The gateway client: Control on the orchestrator, Sandbox on one or more sidecars.

Call order (README, "Gateway walkthrough"): ``put_catalog``/``open_run`` on the
orchestrator, ``describe_surface`` for the model's tool definitions, then per model tool
call ``Run.exec`` / ``Run.wait`` on a sidecar, each nested ``ToolCallRequested`` answered
with ``BridgeCallback``, and ``Run.close`` at the end of the agent run.

Nested calls are answered on a thread pool, so parallel calls in the guest run in
parallel here and the event stream keeps being read. A handler that is still running when
the exec returns ``waiting`` answers when it finishes; the answer is kept with the
suspended run and delivered by the next ``wait``.
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
from dataclasses import dataclass
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
    Scope,
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

ToolHandler = Callable[[ToolCall], Any]
"""Runs one nested call. Returns the tool's result (any JSON-compatible value, a ``RawJson``,
or ``ANSWER_LATER``); raising fails the call (``ToolFailure`` sets the error name)."""

OutputHandler = Callable[[OutputItem], None]
Metadata = Sequence[tuple[str, str]]
"""gRPC metadata sent with an Exec or Wait, e.g. ``[("traceparent", "00-<trace>-<span>-01")]``
(keys lower-case, as gRPC requires)."""
AnswerErrorHandler = Callable[[ToolCall, Exception], None]


def dispatch(tools: Iterable[ToolSpec]) -> ToolHandler:
    """A ToolHandler that routes each call to its ToolSpec's ``handler`` (by source, owner
    and name, as in the catalog id) with the parsed input."""
    table: dict[tuple[ToolSource, str, str], Callable[[Any], Any]] = {}
    for tool in tools:
        if tool.handler is not None:
            table[(tool.source, tool.effective_owner, tool.name)] = tool.handler

    def handle(call: ToolCall) -> Any:
        handler = table.get((call.source, call.source_name, call.tool_name))
        if handler is None:
            raise ToolFailure(f"the gateway has no handler for {call.tool_id}", name="ToolUnavailable")
        return handler(call.input)

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
    ) -> Run:
        """Opens (or replaces) the run for ``scope``, with tools sent inline or a catalog id
        from ``put_catalog``. ``on_tool_call`` is the run's default handler; without one, the
        ToolSpecs' own handlers answer (``dispatch``)."""
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
        handler = on_tool_call if on_tool_call is not None else (dispatch(tools) if tools is not None else None)
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
    ) -> ExecResult:
        """Runs the model's ``exec`` input on a sidecar and returns its result. ``code``,
        ``command`` and ``language`` are passed as the model gave them (a bad value is a
        ``failed``/``invalid_input`` result, not an exception). ``metadata`` goes with the
        call: W3C ``traceparent``/``tracestate`` make the sidecar's spans children of the
        gateway's (each ``ToolCall.trace_parent`` then names its nested span)."""
        req = sandbox_pb2.ExecRequest(scope=scope.to_wire(), exec_call_id=exec_call_id or _new_id("exec"))
        if code is not None:
            req.code = code
        if command is not None:
            req.command = command
        if language is not None:
            req.language = language
        if config is not None:
            req.config.CopyFrom(config.to_wire())
        index = self._pick(sidecar)
        return self._follow(scope, index, lambda: self._sandboxes[index].Exec(req, metadata=_metadata(metadata)), on_tool_call, on_output)

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

    def answer(self, scope: Scope, call_id: str, value: Any = None, *, sidecar: int | None = None) -> bool:
        """Answers a nested call with its result (JSON-compatible value or ``RawJson``).
        Returns ``delivered_live``: False when the answer was kept with a suspended run."""
        return self._bridge(scope, call_id, _result_outcome(value), sidecar)

    def fail(self, scope: Scope, call_id: str, message: str, *, name: str = "Error", sidecar: int | None = None) -> bool:
        """Fails a nested call: the guest gets a catchable Error with ``name`` and ``message``."""
        return self._bridge(scope, call_id, ("error", common_pb2.ToolError(name=name, message=message)), sidecar)

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
    ) -> ExecResult:
        handler = on_tool_call or _no_handler
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
                    self._start_handler(scope, call, handler)
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

    def _start_handler(self, scope: Scope, call: ToolCall, handler: ToolHandler) -> None:
        future = self._pool.submit(self._handle, scope, call, handler)
        with self._lock:
            self._inflight.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[None]) -> None:
        with self._lock:
            self._inflight.discard(future)

    def _handle(self, scope: Scope, call: ToolCall, handler: ToolHandler) -> None:
        outcome: tuple[str, Any]
        try:
            value = handler(call)
            if value is ANSWER_LATER:
                return
            outcome = _result_outcome(value)
        except ToolFailure as failure:
            outcome = ("error", common_pb2.ToolError(name=failure.name, message=failure.message))
        except Exception as err:  # the guest sees name and message, never a host stack
            outcome = ("error", common_pb2.ToolError(name=type(err).__name__, message=str(err)))
        try:
            self._bridge(scope, call.call_id, outcome, None)
        except Exception as err:
            if self._on_answer_error is not None:
                self._on_answer_error(call, err)
            else:
                log.warning("could not answer nested call %s (%s): %s", call.call_id, call.tool_id, err)

    def _bridge(self, scope: Scope, call_id: str, outcome: tuple[str, Any], sidecar: int | None) -> bool:
        req = sandbox_pb2.BridgeCallbackRequest(scope=scope.to_wire(), call_id=call_id)
        kind, payload = outcome
        if kind == "result_json":
            req.result_json = payload
        else:
            req.error.CopyFrom(payload)
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
                with self._lock:
                    self._call_sidecar.pop(call_id, None)  # answered, settled or unknown: done with it
                raise last from None
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
    ) -> list[ExecResult]:
        """exec, then ``wait`` while the result is ``waiting`` (at most ``max_waits`` times), as
        a model following ``runId`` would. Returns every segment's result, the last one final
        unless the bound was reached (then it is still ``waiting``). ``metadata`` goes with
        every call."""
        results = [self.exec(code, language=language, on_tool_call=on_tool_call, metadata=metadata)]
        if on_result is not None:
            on_result(results[-1])
        while results[-1].waiting and len(results) <= max_waits:
            run_id = results[-1].code_mode_run_id
            assert run_id is not None
            results.append(self.wait(run_id, on_tool_call=on_tool_call, metadata=metadata))
            if on_result is not None:
                on_result(results[-1])
        return results

    def answer(self, call_id: str, value: Any = None, *, sidecar: int | None = None) -> bool:
        """Answers a nested call (e.g. one a handler deferred with ``ANSWER_LATER``)."""
        return self.client.answer(self.scope, call_id, value, sidecar=sidecar)

    def fail(self, call_id: str, message: str, *, name: str = "Error", sidecar: int | None = None) -> bool:
        return self.client.fail(self.scope, call_id, message, name=name, sidecar=sidecar)

    def trajectory(self) -> list[TrajectoryStep]:
        return self.client.trajectory(self.scope)

    def close(self) -> int:
        """CloseRun: drops the run's suspended snapshots and trajectory."""
        return self.client.close_run(self.scope)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _result_outcome(value: Any) -> tuple[str, Any]:
    if isinstance(value, RawJson):
        return ("result_json", value.text)
    return ("result_json", json.dumps(value, allow_nan=False))


def _metadata(metadata: Metadata | None) -> tuple[tuple[str, str], ...] | None:
    return tuple((k, v) for k, v in metadata) if metadata else None


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"
