"""How many cases of each kind, from which seed: env HERD_DIFF_SEED and
HERD_DIFF_CASES, else fixed defaults, so every run is the same run."""

import os

DEFAULT_SEED = 9112
DEFAULT_CASES = 10000


def diff_seed():
    return int(os.environ.get("HERD_DIFF_SEED", DEFAULT_SEED))


def diff_cases():
    return int(os.environ.get("HERD_DIFF_CASES", DEFAULT_CASES))
