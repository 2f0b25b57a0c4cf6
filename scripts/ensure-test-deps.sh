#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages when it is missing, so
# `npm test` passes on a fresh machine: redis-server (the Redis store's tests start a
# real one on a free port), and for the Python gateway client's tests
# (test/integration/python-client.test.ts) Debian's /usr/bin/python3 with python3-grpcio and
# python3-protobuf, plus protoc and grpc_python_plugin (protobuf-compiler,
# protobuf-compiler-grpc) for clients/python/generate.sh, and pip, setuptools and wheel
# (python3-pip, python3-setuptools, python3-wheel) to build and install the client as a
# package offline. Runs as `npm test`'s pretest step; a no-op when all is there.
set -euo pipefail
PY=/usr/bin/python3 # Debian's; a python3 earlier on PATH may not see Debian's packages
has_py_module() { [ -x "$PY" ] && "$PY" -c "import $1" >/dev/null 2>&1; }
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
has_py_module grpc || missing+=(python3-grpcio)
has_py_module google.protobuf || missing+=(python3-protobuf)
has_py_module pip || missing+=(python3-pip)
has_py_module setuptools || missing+=(python3-setuptools)
has_py_module wheel || missing+=(python3-wheel)
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
command -v grpc_python_plugin >/dev/null 2>&1 || missing+=(protobuf-compiler-grpc)
[ "${#missing[@]}" -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "ensure-test-deps: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]}) or run as root" >&2
    exit 1
  fi
  SUDO=sudo
fi
echo "ensure-test-deps: installing ${missing[*]} from Debian's packages" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
command -v redis-server >/dev/null
has_py_module grpc && has_py_module google.protobuf
has_py_module pip && has_py_module setuptools && has_py_module wheel
command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null
