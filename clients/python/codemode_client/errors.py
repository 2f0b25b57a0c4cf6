"""Exceptions: contract violations (gRPC statuses) and a tool failure a handler may raise.

A program that fails is not raised by ``exec``/``wait``: it is an ``ExecResult`` with status
``failed``, which the model reads like any other result; ``ExecResult.raise_for_failure()``
turns it into ``ExecFailed`` when a gateway wants an exception. The other exceptions are for
the gRPC statuses the service answers contract violations with (README, "Design decisions":
``src/protocol/service-error.ts`` is the one place they map on the server).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

if TYPE_CHECKING:
    from .models import ErrorCode, ExecResult, Refusal


class CodeModeError(Exception):
    """An error from the service. ``status`` is the gRPC status code, ``details`` its message.
    Subclasses name the status; ``ExecFailed`` is a failed program result (status ``OK``: the
    call itself succeeded)."""

    status: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, details: str, status: grpc.StatusCode | None = None) -> None:
        super().__init__(details)
        self.details = details
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return f"{self.status.name}: {self.details}"


class InvalidArgument(CodeModeError):
    """The request breaks the contract: no scope, malformed JSON, an id over its byte limit,
    bytes that do not decode, a namespace registration refused (the message names the path)."""

    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(CodeModeError):
    """No such call, run or catalog (e.g. BridgeCallback with an unknown call id)."""

    status = grpc.StatusCode.NOT_FOUND


class AlreadyExists(CodeModeError):
    """The nested call was already answered."""

    status = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(CodeModeError):
    """No run is open for the scope (call OpenRun first), or the call's exec already ended."""

    status = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(CodeModeError):
    """The caller's scope does not own the call or run."""

    status = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(CodeModeError):
    """The port requires a bearer token (``authorization: Bearer <token>`` metadata) and the
    call carried none, or another one."""

    status = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(CodeModeError):
    """A store or queue limit was reached."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(CodeModeError):
    """The service (or its orchestrator, or store) cannot be reached, or the sidecar is draining:
    retry on another replica."""

    status = grpc.StatusCode.UNAVAILABLE


class Internal(CodeModeError):
    """A server bug (logged there with details)."""

    status = grpc.StatusCode.INTERNAL


class ExecFailed(CodeModeError):
    """A ``failed`` exec or wait result, raised by ``ExecResult.raise_for_failure()``.

    ``code`` is the seed's error code (``ErrorCode.TIMEOUT``, ``INVALID_INPUT``…; None for an
    uncaught guest exception), ``refusal`` why an exec or wait was refused (None when the
    program ran), ``details`` the seed's error message and ``result`` the whole result (its
    ``model_json`` is still what the model should see).
    """

    status = grpc.StatusCode.OK

    def __init__(self, result: ExecResult) -> None:
        super().__init__(result.error or "the program failed")
        self.result = result
        self.code: ErrorCode | None = result.code
        self.refusal: Refusal | None = result.refusal

    def __str__(self) -> str:
        what = self.code.value if self.code is not None else "uncaught"
        if self.refusal is not None:
            what += f", {self.refusal.value}"
        return f"failed ({what}): {self.details}"


_BY_STATUS: dict[grpc.StatusCode, type[CodeModeError]] = {
    cls.status: cls
    for cls in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, PermissionDenied, Unauthenticated, ResourceExhausted, Unavailable, Internal)
}


def from_rpc_error(err: grpc.RpcError) -> CodeModeError:
    """The CodeModeError subclass for a gRPC error raised by a stub call."""
    status = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (err.details() if isinstance(err, grpc.Call) else None) or str(err)
    cls = _BY_STATUS.get(status, CodeModeError)
    return cls(details, status)


class ToolFailure(Exception):
    """Raise from a tool handler to fail the nested call with an explicit error name.

    Any other exception fails it too, named after the exception's class. The guest sees a
    plain catchable ``Error`` with ``name`` and ``message``; never a host stack.
    """

    def __init__(self, message: str, name: str = "Error") -> None:
        super().__init__(message)
        self.name = name
        self.message = message
