"""Typed values a gateway works with, and their mapping to and from the wire messages.

Enums are ``StrEnum``s whose values are the seed's lower-case names (``"completed"``,
``"invalid_input"``, ``"pending_tools"``, ``"run_unavailable"``…), the words ``model_json``
uses. They map to the proto enums by name (``ERROR_CODE_INVALID_INPUT`` ↔
``ErrorCode.INVALID_INPUT``); the tests check both sides list the same values.
JSON values cross the wire as JSON text (``*_json`` fields): this module parses them
(``value``, ``input``) and keeps the text beside (``value_json``, ``input_json``).
"""
from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from ._proto import common_pb2, control_pb2, sandbox_pb2
from .errors import ExecFailed

# --- enums -------------------------------------------------------------------------------


class ToolSource(enum.StrEnum):
    """Where a tool comes from; also the first segment of its catalog id (``openclaw`` by
    default, see ``CodeModeConfig.core_source_name``)."""

    OPENCLAW = "openclaw"
    MCP = "mcp"
    CLIENT = "client"


class ToolOrigin(enum.StrEnum):
    """Where a gateway tool sits in the seed's catalog order."""

    CORE = "core"
    BUNDLED_PLUGIN = "bundled_plugin"
    EXTERNAL_PLUGIN = "external_plugin"


class AllowedCallers(enum.StrEnum):
    """Who may call a tool (``Tool.allowed_callers``): the model directly, a program (code
    mode's ``exec``, ``tool_search_code``, ``codemode.run``), or both (the default, as a tool
    without the rule). A ``"model"`` tool is absent from every program's catalog and refused
    when a program calls it; a ``"program"`` tool is never a direct definition nor found by
    Tool Search's structured tools."""

    MODEL = "model"
    PROGRAM = "program"
    BOTH = "both"


# The wire names of AllowedCallers (the proto says MODEL_AND_PROGRAM for "both").
_CALLERS_WIRE: dict[AllowedCallers, str] = {
    AllowedCallers.MODEL: "TOOL_CALLERS_MODEL",
    AllowedCallers.PROGRAM: "TOOL_CALLERS_PROGRAM",
    AllowedCallers.BOTH: "TOOL_CALLERS_MODEL_AND_PROGRAM",
}


def allowed_callers_to_wire(value: AllowedCallers | str | None) -> str:
    """The proto ToolCallers value name; ``TOOL_CALLERS_UNSPECIFIED`` (both) for None. A
    string other than ``"model"``, ``"program"`` or ``"both"`` is a ValueError."""
    if value is None:
        return "TOOL_CALLERS_UNSPECIFIED"
    return _CALLERS_WIRE[AllowedCallers(value)]


class Status(enum.StrEnum):
    COMPLETED = "completed"
    WAITING = "waiting"
    FAILED = "failed"


class ErrorCode(enum.StrEnum):
    """The seed's CodeModeErrorCode of a ``failed`` result (None: an uncaught guest exception)."""

    INVALID_INPUT = "invalid_input"
    RUNTIME_UNAVAILABLE = "runtime_unavailable"
    TIMEOUT = "timeout"
    OUTPUT_LIMIT_EXCEEDED = "output_limit_exceeded"
    SNAPSHOT_LIMIT_EXCEEDED = "snapshot_limit_exceeded"
    INTERNAL_ERROR = "internal_error"


class WaitReason(enum.StrEnum):
    """Why a ``waiting`` result waits: tool calls still running, ``yield_control``, or (beyond
    the seed) every call the program still awaits waits for a person's approval."""

    PENDING_TOOLS = "pending_tools"
    YIELD = "yield"
    APPROVAL = "approval"


class ApprovalDecision(enum.StrEnum):
    """Where a call that needed approval stands (``ApprovalRecord.decision``): asked and not
    decided yet, approved, denied, expired before a decision, or ``required`` (the run's
    ``approval_mode`` is ``"error"``: the guest got ``ApprovalRequired`` at once)."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    REQUIRED = "required"


class ReplayVerdict(enum.StrEnum):
    """How a replay of a recorded code-mode run ended (``ReplayReport.verdict``): ``same`` (the
    same calls with the same arguments and the same ``model_json`` byte for byte), ``diverged``
    (the report says where first), or ``incomplete`` (it stopped where the record does not go
    on: a secret answer, a capped record; everything before it was the same)."""

    SAME = "same"
    DIVERGED = "diverged"
    INCOMPLETE = "incomplete"


ApprovalMode = Literal["pause", "error"]
"""``CodeModeConfig.approval_mode``: ``"pause"`` (the default: the call stays pending while a
person decides, and the run suspends with reason ``approval``) or ``"error"`` (the guest's call
fails at once with a catchable ``ApprovalRequired`` error carrying the reason)."""


class Refusal(enum.StrEnum):
    """Why a ``failed``/``invalid_input`` result refused the exec or wait (``ExecResult.error``
    keeps the seed's exact message)."""

    RUN_UNAVAILABLE = "run_unavailable"
    OTHER_SESSION = "other_session"
    OTHER_AGENT_RUN = "other_agent_run"
    WAIT_IN_FLIGHT = "wait_in_flight"
    TOO_MANY_SUSPENDED = "too_many_suspended"
    CODE_MODE_INACTIVE = "code_mode_inactive"
    CODE_MODE_DISABLED = "code_mode_disabled"
    MISSING_RUN_ID = "missing_run_id"
    INVALID_PROGRAM = "invalid_program"
    # The run's sidecar died after its VM made a call past its last checkpoint (docs/contract.md, "Crash-safe parking").
    RUN_LOST = "run_lost"


E = TypeVar("E", bound=enum.StrEnum)

# Each Python enum and the proto enum it mirrors, with the proto's value-name prefix.
ENUM_WIRE: dict[type[enum.StrEnum], tuple[EnumTypeWrapper, str]] = {
    ToolSource: (common_pb2.ToolSource, "TOOL_SOURCE_"),
    ToolOrigin: (common_pb2.ToolOrigin, "TOOL_ORIGIN_"),
    Status: (common_pb2.ResultStatus, "RESULT_STATUS_"),
    ErrorCode: (common_pb2.ErrorCode, "ERROR_CODE_"),
    WaitReason: (common_pb2.WaitReason, "WAIT_REASON_"),
    Refusal: (common_pb2.Refusal, "REFUSAL_"),
}


def enum_from_wire(cls: type[E], number: int) -> E | None:
    """The member for a proto enum number; None for UNSPECIFIED (0) or a number this client
    does not know (a newer server)."""
    wrapper, prefix = ENUM_WIRE[cls]
    if number == 0:
        return None
    try:
        name = wrapper.Name(number)
    except ValueError:
        return None
    try:
        return cls(name.removeprefix(prefix).lower())
    except ValueError:
        return None


def enum_to_wire(member: enum.StrEnum | None, cls: type[enum.StrEnum]) -> str:
    """The proto enum value name for a member (the generated constructors take names);
    ``<PREFIX>UNSPECIFIED`` for None."""
    _, prefix = ENUM_WIRE[cls]
    return prefix + ("UNSPECIFIED" if member is None else member.value.upper())


# --- what a gateway sends ----------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """Who a run belongs to. ``agent_run_id`` is the gateway's agent run (one model turn
    loop), not the code-mode run id of a ``waiting`` result."""

    agent_id: str
    session_id: str
    session_key: str
    agent_run_id: str

    def to_wire(self) -> common_pb2.RunScope:
        return common_pb2.RunScope(agent_id=self.agent_id, session_id=self.session_id, session_key=self.session_key, agent_run_id=self.agent_run_id)


@dataclass(frozen=True)
class Annotations:
    """MCP tool annotations (hints shown in declarations; never trusted for policy)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None

    def to_wire(self) -> common_pb2.ToolAnnotations:
        msg = common_pb2.ToolAnnotations()
        for name in ("title", "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
            value = getattr(self, name)
            if value is not None:
                setattr(msg, name, value)
        return msg


@dataclass(frozen=True)
class ToolSpec:
    """One tool of the gateway's catalog.

    ``owner`` is the wire's ``source_name``: ``"core"`` (the default for OPENCLAW tools), a
    plugin id, an MCP server name (required for MCP tools) or a client app name. The catalog
    id is ``<source>:<owner>:<name>`` (``openclaw:core:weather``, ``mcp:github:create_issue``).
    ``handler`` never crosses the wire: ``dispatch()`` routes nested calls to it.
    ``allowed_callers`` (``"model"``, ``"program"`` or ``"both"``; None: both) says who may
    call the tool (see ``AllowedCallers``).
    ``needs_approval`` (True, or the reason as a string) never crosses the wire either: with
    it, ``dispatch()`` answers each call "approval pending" first and runs ``handler`` only
    once a person approved it (``dispatch``'s ``approver``).
    ``secret`` never crosses the wire either: with it, ``dispatch()`` sends every answer of the
    tool (its result, the error it raised, a person's decision) marked secret, so the run's
    replay record keeps only that the call was answered, not with what (``Secret``).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None
    source: ToolSource = ToolSource.OPENCLAW
    owner: str = ""
    origin: ToolOrigin | None = None
    label: str = ""
    output_schema: Mapping[str, Any] | None = None
    annotations: Annotations | None = None
    examples: Sequence[Any] = ()
    keywords: Sequence[str] = ()
    handler: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    allowed_callers: AllowedCallers | Literal["model", "program", "both"] | None = None
    needs_approval: bool | str = False
    secret: bool = False

    @property
    def approval_reason(self) -> str | None:
        """The reason sent with the approval-pending answer ("" for ``needs_approval=True``);
        None when the tool needs no approval."""
        if self.needs_approval is False or self.needs_approval == "":
            return None
        return self.needs_approval if isinstance(self.needs_approval, str) else ""

    @property
    def effective_owner(self) -> str:
        return self.owner or ("core" if self.source is ToolSource.OPENCLAW else "")

    def to_wire(self) -> common_pb2.Tool:
        msg = common_pb2.Tool(
            name=self.name,
            label=self.label,
            description=self.description,
            parameters_json=json.dumps(self.parameters if self.parameters is not None else {"type": "object"}),
            source=enum_to_wire(self.source, ToolSource),
            source_name=self.owner,
            origin=enum_to_wire(self.origin, ToolOrigin),
            output_schema_json=json.dumps(self.output_schema) if self.output_schema is not None else "",
            examples_json=[json.dumps(e) for e in self.examples],
            keywords=list(self.keywords),
            allowed_callers=allowed_callers_to_wire(self.allowed_callers),
        )
        if self.annotations is not None:
            msg.annotations.CopyFrom(self.annotations.to_wire())
        return msg


@dataclass(frozen=True)
class McpServerSpec:
    """What the gateway knows about one MCP server; its tools are ``ToolSpec``s with
    ``source=ToolSource.MCP`` and ``owner=name``."""

    name: str
    server_id: str = ""
    title: str = ""
    version: str = ""
    description: str = ""
    instructions: str = ""
    resources: bool = False
    prompts: bool = False
    aliases: Sequence[str] = ()

    def to_wire(self) -> common_pb2.McpServer:
        return common_pb2.McpServer(
            name=self.name,
            server_id=self.server_id,
            title=self.title,
            version=self.version,
            description=self.description,
            instructions=self.instructions,
            resources=self.resources,
            prompts=self.prompts,
            aliases=list(self.aliases),
        )


@dataclass(frozen=True)
class Policy:
    """Allow/deny patterns over catalog ids and tool names (``*`` matches any run of
    characters). ``allow_none`` means "allow nothing", unlike an empty ``allow``."""

    allow: Sequence[str] = ()
    deny: Sequence[str] = ()
    allow_none: bool = False

    def to_wire(self) -> common_pb2.Policy:
        return common_pb2.Policy(allow=list(self.allow), deny=list(self.deny), allow_none=self.allow_none)


@dataclass(frozen=True)
class CodeModeConfig:
    """Code-mode limits and switches; ``None`` inherits (run config, then defaults). The
    server clamps numbers to the seed's ranges (README, "Config")."""

    enabled: bool | None = None
    timeout_ms: int | None = None
    memory_limit_bytes: int | None = None
    max_output_bytes: int | None = None
    max_snapshot_bytes: int | None = None
    max_pending_tool_calls: int | None = None
    snapshot_ttl_seconds: int | None = None
    search_default_limit: int | None = None
    max_search_limit: int | None = None
    languages: Sequence[str] = ()
    core_source_name: str | None = None
    # Beyond the seed: how long a call may await a person's approval (server clamp
    # 1000-86400000 ms, default 10 min), and what an approval-pending answer does.
    approval_timeout_ms: int | None = None
    approval_mode: ApprovalMode | None = None
    # Beyond the seed: code mode's ``store(key, value)`` / ``load(key)``, small JSON values
    # kept per session (the scope's agent_id and session_key) across its execs and waits.
    # ``session_store`` (default True; False: exactly the seed's globals), a value's JSON
    # bytes (default 65536, clamp 1-1048576), keys per session (256, 1-4096), bytes per
    # session, keys plus values (1048576, 1024-16777216), and how long a session's store
    # lives after its last write (604800 s, 60-7776000).
    session_store: bool | None = None
    max_session_value_bytes: int | None = None
    max_session_keys: int | None = None
    max_session_bytes: int | None = None
    session_ttl_seconds: int | None = None
    # Beyond the seed: the default of ``exec``'s ``await_results`` for the run's execs
    # (False), also whether the model's exec tool offers ``awaitResults``; and the longest
    # such an exec stays open while its program is parked (default 300000 ms, clamp
    # 1000-3600000), after which it returns ``waiting`` as any exec.
    await_results: bool | None = None
    max_await_ms: int | None = None
    # Beyond the seeds: keep what each exec and wait segment consumed so the run can be
    # replayed (``CodeModeClient.replay``; default True). False: no replay record is kept.
    record_for_replay: bool | None = None
    # Beyond the seeds: a VM idle this long on tool answers is checkpointed to the store, so
    # a ``wait`` on another sidecar resumes it if its sidecar dies (default 1000 ms, clamp
    # 100-60000; at or above ``timeout_ms`` the run suspends first and takes none).
    checkpoint_after_ms: int | None = None

    def to_wire(self) -> common_pb2.CodeModeConfig:
        msg = common_pb2.CodeModeConfig(languages=list(self.languages))
        for name in (
            "enabled",
            "timeout_ms",
            "memory_limit_bytes",
            "max_output_bytes",
            "max_snapshot_bytes",
            "max_pending_tool_calls",
            "snapshot_ttl_seconds",
            "search_default_limit",
            "max_search_limit",
            "core_source_name",
            "approval_timeout_ms",
            "approval_mode",
            "session_store",
            "max_session_value_bytes",
            "max_session_keys",
            "max_session_bytes",
            "session_ttl_seconds",
            "await_results",
            "max_await_ms",
            "record_for_replay",
            "checkpoint_after_ms",
        ):
            value = getattr(self, name)
            if value is not None:
                setattr(msg, name, value)
        return msg


def ns_tool(tool_name: str, args: Sequence[str] | None = None) -> dict[str, Any]:
    """A callable member of a namespace scope: calls the plugin tool ``tool_name``; with
    ``args``, positional guest arguments become those input keys."""
    marker: dict[str, Any] = {"$tool": tool_name}
    if args is not None:
        marker["args"] = list(args)
    return marker


def ns_context(name: str) -> dict[str, str]:
    """A run-context value in a namespace scope: ``agentId``, ``sessionId``, ``sessionKey``,
    ``runId`` (the scope's agent_run_id) or ``config``."""
    return {"$context": name}


@dataclass(frozen=True)
class NamespaceSpec:
    """An internal code-mode namespace (``Issues.list(...)``) owned by a plugin. ``scope`` is
    plain JSON in which ``ns_tool(...)`` markers are the callable members."""

    plugin_id: str
    id: str
    global_name: str
    scope: Mapping[str, Any]
    required_tool_names: Sequence[str] = ()
    description: str = ""
    prompt: str = ""

    def to_wire(self) -> control_pb2.NamespaceRegistration:
        return control_pb2.NamespaceRegistration(
            plugin_id=self.plugin_id,
            id=self.id,
            global_name=self.global_name,
            description=self.description,
            prompt=self.prompt,
            required_tool_names=list(self.required_tool_names),
            scope_json=json.dumps(self.scope),
        )

    @staticmethod
    def from_wire(msg: control_pb2.NamespaceRegistration) -> NamespaceSpec:
        return NamespaceSpec(
            plugin_id=msg.plugin_id,
            id=msg.id,
            global_name=msg.global_name,
            scope=json.loads(msg.scope_json or "{}"),
            required_tool_names=tuple(msg.required_tool_names),
            description=msg.description,
            prompt=msg.prompt,
        )


@dataclass(frozen=True)
class RawJson:
    """A tool result that is already JSON text: sent as ``result_json`` unchanged."""

    text: str


# --- what a gateway receives -------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """A nested tool call the guest made (``ToolCallRequested``), with its input parsed.

    ``trace_parent`` / ``trace_state`` are the W3C ``traceparent`` / ``tracestate`` of the
    sidecar's span for this call (``codemode.tool_call``) when the sidecar has tracing on,
    empty strings otherwise: parent the span of the tool's execution on them, and the
    gateway's trace shows the nested call under its exec or wait.
    """

    call_id: str
    tool_id: str
    tool_name: str
    source: ToolSource
    source_name: str
    input: Any
    input_json: str
    parent_call_id: str
    code_mode_run_id: str
    trace_parent: str = ""
    trace_state: str = ""

    @staticmethod
    def from_wire(msg: sandbox_pb2.ToolCallRequested) -> ToolCall:
        return ToolCall(
            call_id=msg.call_id,
            tool_id=msg.tool_id,
            tool_name=msg.tool_name,
            source=enum_from_wire(ToolSource, msg.source) or ToolSource.OPENCLAW,
            source_name=msg.source_name,
            input=json.loads(msg.input_json) if msg.input_json else None,
            input_json=msg.input_json,
            parent_call_id=msg.parent_call_id,
            code_mode_run_id=msg.code_mode_run_id,
            trace_parent=msg.trace_parent,
            trace_state=msg.trace_state,
        )


@dataclass(frozen=True)
class PendingCall:
    """A nested call still unsettled when the run suspended. ``awaiting_approval``: the
    gateway answered "approval pending" and no decision came yet; the reason it gave, and
    when the request expires (epoch ms, 0 when not awaiting approval)."""

    call_id: str
    tool_id: str
    tool_name: str
    awaiting_approval: bool = False
    approval_reason: str = ""
    approval_expires_at_ms: int = 0

    @staticmethod
    def from_wire(msg: common_pb2.PendingToolCall) -> PendingCall:
        return PendingCall(
            call_id=msg.call_id,
            tool_id=msg.tool_id,
            tool_name=msg.tool_name,
            awaiting_approval=msg.awaiting_approval,
            approval_reason=msg.approval_reason,
            approval_expires_at_ms=msg.approval_expires_at_ms,
        )


@dataclass(frozen=True)
class OutputItem:
    """One ``text(value)`` / ``json(value)`` / ``console.*`` item, in guest order."""

    kind: str  # "text" or "json"
    text: str

    @property
    def value(self) -> Any:
        """The item's value: the text, or the parsed JSON of a ``json`` item."""
        return json.loads(self.text) if self.kind == "json" else self.text

    @staticmethod
    def from_wire(msg: common_pb2.Output) -> OutputItem:
        kind = msg.WhichOneof("kind") or "text"
        return OutputItem(kind=kind, text=getattr(msg, kind))


@dataclass(frozen=True)
class SourceCounts:
    openclaw: int = 0
    mcp: int = 0
    client: int = 0

    @staticmethod
    def from_wire(msg: common_pb2.SourceCounts) -> SourceCounts:
        return SourceCounts(openclaw=msg.openclaw, mcp=msg.mcp, client=msg.client)


@dataclass(frozen=True)
class ApprovalRecord:
    """One approval a segment saw (``Telemetry.approvals``): asked for, and decided or not.
    ``decision`` is an ``ApprovalDecision`` (a plain string for a value this client does not
    know); ``decided_at_ms`` is 0 while pending."""

    call_id: str
    tool_id: str
    decision: ApprovalDecision | str
    reason: str
    requested_at_ms: int
    decided_at_ms: int

    @staticmethod
    def from_wire(msg: common_pb2.ApprovalRecord) -> ApprovalRecord:
        return ApprovalRecord(
            call_id=msg.call_id,
            tool_id=msg.tool_id,
            decision=_approval_decision(msg.decision),
            reason=msg.reason,
            requested_at_ms=msg.requested_at_ms,
            decided_at_ms=msg.decided_at_ms,
        )


def _approval_decision(text: str) -> ApprovalDecision | str:
    try:
        return ApprovalDecision(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class SessionStoreUse:
    """How one segment used the session store (``Telemetry.session_store``): its ``load`` and
    ``store`` calls, the distinct keys and their values' JSON bytes it committed (0 when the
    segment failed: its writes were dropped), and the session's size after the commit (or as
    last read when nothing was written)."""

    loads: int = 0
    stores: int = 0
    keys_written: int = 0
    bytes_written: int = 0
    keys: int = 0
    bytes: int = 0

    @staticmethod
    def from_wire(msg: common_pb2.SessionStoreUse) -> SessionStoreUse:
        return SessionStoreUse(
            loads=msg.loads,
            stores=msg.stores,
            keys_written=msg.keys_written,
            bytes_written=msg.bytes_written,
            keys=msg.keys,
            bytes=msg.bytes,
        )


@dataclass(frozen=True)
class Telemetry:
    catalog_size: int
    sources: SourceCounts
    search_count: int
    describe_count: int
    call_count: int
    model_visible_tools: tuple[str, ...]
    duration_ms: float
    snapshot_bytes: int
    output_bytes: int
    approvals: tuple[ApprovalRecord, ...] = ()
    # None when the segment made no ``store``/``load`` call.
    session_store: SessionStoreUse | None = None

    @staticmethod
    def from_wire(msg: common_pb2.Telemetry) -> Telemetry:
        return Telemetry(
            catalog_size=msg.catalog_size,
            sources=SourceCounts.from_wire(msg.sources),
            search_count=msg.search_count,
            describe_count=msg.describe_count,
            call_count=msg.call_count,
            model_visible_tools=tuple(msg.model_visible_tools),
            duration_ms=msg.duration_ms,
            snapshot_bytes=msg.snapshot_bytes,
            output_bytes=msg.output_bytes,
            approvals=tuple(ApprovalRecord.from_wire(a) for a in msg.approvals),
            session_store=SessionStoreUse.from_wire(msg.session_store) if msg.HasField("session_store") else None,
        )


@dataclass(frozen=True)
class ExecResult:
    """The result of one exec or wait segment.

    ``model_json`` is what the gateway hands its model as the exec/wait tool result (the
    seed's exact shape, with ``runId``); the other fields are the same result typed for the
    gateway. ``tool_calls`` lists the nested calls announced during this segment.
    """

    status: Status
    model_json: str
    value: Any = None
    value_json: str = ""
    code_mode_run_id: str | None = None
    reason: WaitReason | None = None
    pending_calls: tuple[PendingCall, ...] = ()
    error: str | None = None
    code: ErrorCode | None = None
    refusal: Refusal | None = None
    output: tuple[OutputItem, ...] = ()
    telemetry: Telemetry | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def completed(self) -> bool:
        return self.status is Status.COMPLETED

    @property
    def waiting(self) -> bool:
        return self.status is Status.WAITING

    @property
    def failed(self) -> bool:
        return self.status is Status.FAILED

    @property
    def awaiting_approval(self) -> tuple[PendingCall, ...]:
        """The pending calls that wait for a person's approval (the reason is
        ``WaitReason.APPROVAL`` when these are all the program awaits)."""
        return tuple(p for p in self.pending_calls if p.awaiting_approval)

    @property
    def approval_message(self) -> str | None:
        """The waiting result's ``approval`` text, which tells the model a person is being
        asked; None when the result has none."""
        if self.status is not Status.WAITING:
            return None
        text = self.model.get("approval")
        return text if isinstance(text, str) else None

    @property
    def model(self) -> dict[str, Any]:
        """``model_json`` parsed."""
        parsed: dict[str, Any] = json.loads(self.model_json)
        return parsed

    def raise_for_failure(self) -> ExecResult:
        """Raises ``ExecFailed`` (a ``CodeModeError``) when the result is ``failed``, with the
        seed's ``code`` (None for an uncaught guest exception), the ``refusal`` (None unless the
        exec or wait was refused) and the seed's message; returns the result otherwise, so
        ``run.exec(code).raise_for_failure()`` reads as one step. For a gateway that handles
        failures itself: the model still gets ``model_json`` of a failed result as usual."""
        if self.status is Status.FAILED:
            raise ExecFailed(self)
        return self

    @staticmethod
    def from_wire(msg: common_pb2.Result, tool_calls: Sequence[ToolCall] = ()) -> ExecResult:
        status = enum_from_wire(Status, msg.status)
        if status is None:
            raise ValueError(f"result with unknown status {msg.status}")
        return ExecResult(
            status=status,
            model_json=msg.model_json,
            value=json.loads(msg.value_json) if status is Status.COMPLETED and msg.value_json else None,
            value_json=msg.value_json,
            code_mode_run_id=msg.code_mode_run_id or None,
            reason=enum_from_wire(WaitReason, msg.reason),
            pending_calls=tuple(PendingCall.from_wire(p) for p in msg.pending_tool_calls),
            error=msg.error or None,
            code=enum_from_wire(ErrorCode, msg.code),
            refusal=enum_from_wire(Refusal, msg.refusal),
            output=tuple(OutputItem.from_wire(o) for o in msg.output),
            telemetry=Telemetry.from_wire(msg.telemetry) if msg.HasField("telemetry") else None,
            tool_calls=tuple(tool_calls),
        )


@dataclass(frozen=True)
class ModelTool:
    """One model-visible tool definition. ``tool_id`` is the catalog id of a direct tool
    (direct exposure, or a ``"model"``-only tool listed beside ``exec`` and ``wait``); ""
    for the surface's own tools."""

    name: str
    description: str
    input_schema: dict[str, Any]
    tool_id: str = ""


@dataclass(frozen=True)
class Surface:
    """What the model sees for a run: with code mode active, ``exec`` and ``wait`` (and any
    tool whose ``allowed_callers`` is ``"model"``, beside them). ``tools_json`` is the JSON array of definitions (``{name, description, input_schema}``)
    to send to the model as is."""

    code_mode_active: bool
    inactive_reason: str
    tools: tuple[ModelTool, ...]
    tools_json: str
    serialized_bytes: int
    catalog_size: int
    sources: SourceCounts
    namespaces: tuple[str, ...]

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    @staticmethod
    def from_wire(msg: control_pb2.ModelSurface) -> Surface:
        return Surface(
            code_mode_active=msg.code_mode_active,
            inactive_reason=msg.inactive_reason,
            tools=tuple(ModelTool(t.name, t.description, json.loads(t.input_schema_json or "{}"), t.tool_id) for t in msg.tools),
            tools_json=msg.tools_json,
            serialized_bytes=msg.serialized_bytes,
            catalog_size=msg.catalog_size,
            sources=SourceCounts.from_wire(msg.sources),
            namespaces=tuple(msg.namespaces),
        )


@dataclass(frozen=True)
class Catalog:
    """A catalog stored with PutCatalog: its content address and size."""

    catalog_id: str
    tool_count: int


@dataclass(frozen=True)
class SessionStore:
    """A session's store as committed (``CodeModeClient.get_session_store``): ``entries`` maps
    each key, in key order, to its value parsed (``entries_json`` keeps the JSON text);
    ``bytes`` is the session's size (keys plus values' JSON); ``expires_at_ms`` when it is
    dropped unless written again (epoch ms, 0 when empty)."""

    entries: dict[str, Any] = field(default_factory=dict)
    entries_json: dict[str, str] = field(default_factory=dict)
    bytes: int = 0
    expires_at_ms: int = 0

    @property
    def keys(self) -> list[str]:
        return list(self.entries)

    @staticmethod
    def from_wire(msg: control_pb2.GetSessionStoreResponse) -> SessionStore:
        return SessionStore(
            entries={e.key: json.loads(e.value_json) for e in msg.entries},
            entries_json={e.key: e.value_json for e in msg.entries},
            bytes=msg.bytes,
            expires_at_ms=msg.expires_at_ms,
        )


@dataclass(frozen=True)
class ReplayReport:
    """What a replay of a recorded code-mode run found (``CodeModeClient.replay``).
    ``verdict`` is a ``ReplayVerdict`` (a plain string for a value this client does not know);
    ``summary`` is one sentence for a person (what matched, or where and how it diverged or
    stopped); ``report`` is the whole report parsed (``verdict``, ``summary``, ``build``,
    ``codeModeRunId``, ``segments`` with each segment's verdict and any ``divergence``; see
    docs/replay.md, "The report") and ``report_json`` its JSON text."""

    verdict: ReplayVerdict | str
    summary: str
    report: dict[str, Any] = field(default_factory=dict)
    report_json: str = ""

    @property
    def same(self) -> bool:
        return self.verdict == ReplayVerdict.SAME

    @staticmethod
    def from_wire(msg: control_pb2.ReplayRunResponse) -> ReplayReport:
        report: dict[str, Any] = json.loads(msg.report_json) if msg.report_json else {}
        return ReplayReport(verdict=_replay_verdict(msg.verdict), summary=msg.summary, report=report, report_json=msg.report_json)


def _replay_verdict(text: str) -> ReplayVerdict | str:
    try:
        return ReplayVerdict(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class NestedCall:
    call_id: str
    tool_id: str
    tool_name: str
    outcome: str  # "ok", "error", "pending", "denied", "abandoned"
    error_message: str
    started_at_ms: int
    duration_ms: float
    parent_call_id: str
    # Beyond the seed: "" when the call never needed approval; else an ApprovalDecision value
    # ("pending", "approved", "denied", "expired", "required"), the reason, and when it was
    # asked for and decided (epoch ms; 0 while pending).
    approval: str = ""
    approval_reason: str = ""
    approval_requested_at_ms: int = 0
    approval_decided_at_ms: int = 0


@dataclass(frozen=True)
class TrajectoryStep:
    kind: str  # "exec" or "wait"
    call_id: str
    code_mode_run_id: str
    status: str
    error_code: str
    started_at_ms: int
    duration_ms: float
    nested_calls: tuple[NestedCall, ...]
    # Beyond the seed: the session-store keys and bytes this segment committed.
    session_keys_written: int = 0
    session_bytes_written: int = 0

    @staticmethod
    def from_wire(msg: control_pb2.TrajectoryStep) -> TrajectoryStep:
        return TrajectoryStep(
            kind=msg.kind,
            call_id=msg.call_id,
            code_mode_run_id=msg.code_mode_run_id,
            status=msg.status,
            error_code=msg.error_code,
            started_at_ms=msg.started_at_ms,
            duration_ms=msg.duration_ms,
            nested_calls=tuple(
                NestedCall(
                    n.call_id,
                    n.tool_id,
                    n.tool_name,
                    n.outcome,
                    n.error_message,
                    n.started_at_ms,
                    n.duration_ms,
                    n.parent_call_id,
                    approval=n.approval,
                    approval_reason=n.approval_reason,
                    approval_requested_at_ms=n.approval_requested_at_ms,
                    approval_decided_at_ms=n.approval_decided_at_ms,
                )
                for n in msg.nested_calls
            ),
            session_keys_written=msg.session_keys_written,
            session_bytes_written=msg.session_bytes_written,
        )
