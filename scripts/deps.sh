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
need liburing-dev # --model uring
if [ "$what" = test ]; then
    have_cmd python3 || need python3
    python3 -c 'import pytest' >/dev/null 2>&1 || need python3-pytest
    have_cmd curl || need curl
    have_cmd clang || need clang
    need libclang-rt-14-dev
    have_cmd timeout || need coreutils
    python3 -m pip --version >/dev/null 2>&1 || need python3-pip
    # real PHP behind herd (tests/integration/test_fastcgi.py)
    have_cmd php-cgi || need php8.2-cgi
    need php8.2-fpm
fi
if [ -n "$pkgs" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "deps: installing$pkgs"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    else
        echo "deps: missing packages; run as root:  apt-get install -y$pkgs" >&2
        exit 1
    fi
fi

# h11, the reference parser of the differential tests (tests/diff), pinned,
# into build/pydeps: the tests put that folder first on sys.path, and the
# system Python stays as it is (pip's --target does not touch it).
if [ "$what" = test ]; then
    h11=0.16.0
    if ! PYTHONPATH=build/pydeps python3 -c \
        "import sys, h11; sys.exit(h11.__version__ != '$h11')" >/dev/null 2>&1; then
        echo "deps: h11 $h11 into build/pydeps"
        python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
            --no-deps --upgrade --target build/pydeps "h11==$h11"
    fi
fi
