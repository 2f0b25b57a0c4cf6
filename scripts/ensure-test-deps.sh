#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages when it is missing, so
# `npm test` passes on a fresh machine: redis-server (the Redis store's tests start a
# real one on a free port). Runs as `npm test`'s pretest step; a no-op when all is there.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
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
