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
need libssl-dev
if [ "$what" = test ]; then
    have_cmd python3 || need python3
    python3 -c 'import pytest' >/dev/null 2>&1 || need python3-pytest
    have_cmd curl || need curl
    have_cmd clang || need clang
    need libclang-rt-14-dev
    have_cmd timeout || need coreutils
    have_cmd openssl || need openssl
    have_cmd testssl || need testssl.sh
    python3 -m pip --version >/dev/null 2>&1 || need python3-pip
    # real PHP behind herd (tests/integration/test_fastcgi.py)
    have_cmd php-cgi || need php8.2-cgi
    need php8.2-fpm
    # the status page's browser test drives it through Playwright
    have_cmd chromium || need chromium
    # herd lab --profile's test records with perf
    have_cmd perf || need linux-perf
    # a client that never retries, across reloads (test_hitless)
    have_cmd wrk || need wrk
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

# Test-only Python packages, pinned, into build/pydeps: the tests put that
# folder first on sys.path, and the system Python stays as it is (pip's
# --target does not touch it). A package counts as there only when
# build/pydeps holds it: a system Python may have the same name at the same
# version (a CI image with h11 installed did), and the tests that check
# where it came from must find it here.
in_pydeps() { # DIST VERSION
    PYTHONPATH=build/pydeps python3 -c "
import os, sys, importlib.metadata as m
d = m.distribution('$1')
here = os.path.realpath('build/pydeps')
sys.exit(d.version != '$2' or os.path.realpath(str(d.locate_file(''))) != here)" \
        >/dev/null 2>&1
}

# h11 is the reference parser of the differential tests (tests/diff);
# prometheus-client's text parser reads the status page's Prometheus output;
# Playwright with its one dependency (drives the system chromium for the
# status page's test; it never downloads a browser of its own).
pydep() { # DIST VERSION
    if ! in_pydeps "$1" "$2"; then
        echo "deps: $1 $2 into build/pydeps"
        python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
            --no-deps --upgrade --target build/pydeps "$1==$2"
    fi
}
if [ "$what" = test ]; then
    pydep h11 0.16.0
    pydep prometheus-client 0.21.1
    pydep greenlet 3.5.6
    pydep playwright 1.65.2
fi

# REDbot (tests/integration/test_redbot.py), a linter of HTTP responses,
# with every dependency pinned and installed in one call (--no-deps: the
# list is the whole closure pip resolved for redbot 2.7.1).
redbot=2.7.1
if [ "$what" = test ] && ! in_pydeps redbot "$redbot"; then
    echo "deps: redbot $redbot and its dependencies into build/pydeps"
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
        --no-deps --upgrade --target build/pydeps "redbot==$redbot" \
        babel==2.18.0 brotli==1.2.1 certifi==2026.10.18 cffi==2.1.1 chardet==7.7.0 \
        cryptography==50.0.2 dnspython==2.9.2 http-sf==1.5.0 httplint==2026.10.4 \
        idna==3.20 Jinja2==3.1.6 Markdown==3.11.3 MarkupSafe==3.0.4 netaddr==1.3.0 \
        pycparser==3.12 sniffpy==1.0.0 thor==0.17.0 typing_extensions==4.16.0
fi
