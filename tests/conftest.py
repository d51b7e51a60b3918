"""Fixtures shared by test modules."""

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def bench_script(request):
    """The ``bench/`` script a test module names in ``BENCH_SCRIPT``, imported
    as a module, with ``bench/`` on ``sys.path`` while the module's tests run
    (``real_data``'s baselines run in child processes that import it again
    by name)."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(request.module.BENCH_SCRIPT)
    finally:
        sys.path.remove(str(BENCH))
