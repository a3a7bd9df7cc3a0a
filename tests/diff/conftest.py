"""Setup for the differential tests: herd's parsers against h11.

h11 is the reference: a strict, pure-Python HTTP/1.1 parser. scripts/deps.sh
installs the pinned version into build/pydeps (not into the system Python),
and this file puts that folder first on sys.path, so an h11 the system may
have does not stand in for it. The run refuses any other version: the
expectations (which forms h11 rejects) are those of 0.16.

herd's side is the driver tests/diff/verdict.c (env HERD_VERDICT, default
build-asan/diff/verdict; `make diff` builds it and runs this folder).

The cases are generated from a seed: env HERD_DIFF_SEED (printed in every
failure), and HERD_DIFF_CASES sets how many of each kind.
"""

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
H11_VERSION = "0.16.0"
PYDEPS = REPO_ROOT / "build" / "pydeps"

sys.path.insert(0, str(PYDEPS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from seed import diff_cases, diff_seed  # noqa: E402

try:
    import h11
except ImportError:
    h11 = None


def pytest_report_header(config):
    return "differential: seed %d (HERD_DIFF_SEED), %d cases per kind (HERD_DIFF_CASES)" % (
        diff_seed(), diff_cases())


@pytest.fixture(scope="session")
def reference():
    """The h11 module, exactly the pinned version, or a loud failure."""
    if h11 is None:
        pytest.fail("h11 is not installed in %s: run `sh scripts/deps.sh test`" % PYDEPS)
    where = Path(h11.__file__).resolve()
    if h11.__version__ != H11_VERSION or PYDEPS.resolve() not in where.parents:
        pytest.fail("want h11 %s from %s, got %s from %s: run `sh scripts/deps.sh test`"
                    % (H11_VERSION, PYDEPS, h11.__version__, where))
    return h11


@pytest.fixture(scope="session")
def verdict_bin():
    path = Path(os.environ.get("HERD_VERDICT") or REPO_ROOT / "build-asan" / "diff" / "verdict")
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not os.access(path, os.X_OK):
        pytest.fail("no driver at %s: run `make build-asan/diff/verdict`" % path)
    return str(path)
