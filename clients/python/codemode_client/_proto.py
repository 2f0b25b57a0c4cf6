"""Loads the generated stubs of the wire contract (see generate.sh).

protoc's Python output imports its sibling modules as ``codemode.<package>.v1``, so the
generated tree ``_gen/`` is put on ``sys.path`` once, here, and nowhere else.
"""
from __future__ import annotations

import sys
from pathlib import Path

_GEN = Path(__file__).resolve().parent / "_gen"
_HINT = "run clients/python/generate.sh (and scripts/ensure-test-deps.sh on a fresh machine)"

try:
    import grpc  # noqa: F401  (imported for the check)
    import google.protobuf  # noqa: F401
except ImportError as err:  # pragma: no cover - environment check
    raise ImportError(
        f"codemode_client needs grpcio and protobuf ({err}); on Debian use /usr/bin/python3 with "
        "python3-grpcio and python3-protobuf (scripts/ensure-test-deps.sh installs them)"
    ) from err

if not (_GEN / "codemode" / "sandbox" / "v1" / "sandbox_pb2.py").is_file():
    raise ImportError(f"codemode_client: generated stubs are missing in {_GEN}; {_HINT}")

if str(_GEN) not in sys.path:
    sys.path.insert(0, str(_GEN))

from codemode.common.v1 import common_pb2  # noqa: E402
from codemode.orchestrator.v1 import control_pb2, control_pb2_grpc  # noqa: E402
from codemode.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc  # noqa: E402

__all__ = ["common_pb2", "control_pb2", "control_pb2_grpc", "sandbox_pb2", "sandbox_pb2_grpc"]
