#!/bin/sh
# Installs what `make run` (build) or `make test` (test) needs on Debian:
# with apt-get when run as root, else it prints the command to run.
set -eu
what=${1:-build}
pkgs=""
need() { dpkg -s "$1" >/dev/null 2>&1 || pkgs="$pkgs $1"; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }

have_cmd gcc || need gcc
need libc6-dev
if [ "$what" = test ]; then
    have_cmd python3 || need python3
    python3 -c 'import pytest' >/dev/null 2>&1 || need python3-pytest
    have_cmd curl || need curl
    have_cmd clang || need clang
    need libclang-rt-14-dev
    have_cmd timeout || need coreutils
fi
[ -z "$pkgs" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$pkgs"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
else
    echo "deps: missing packages; run as root:  apt-get install -y$pkgs" >&2
    exit 1
fi
