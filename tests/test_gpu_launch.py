"""Kernel launches of fastkds.gpu print no low-occupancy warning (issue 25):
launches are sized to their work, so small grids are intended. Runs without
a GPU: numba.cuda's own launch configuration is built on a stand-in kernel."""

import ast
import inspect
import warnings

import pytest

gpu = pytest.importorskip("fastkds.gpu")
dispatcher = pytest.importorskip("numba.cuda.dispatcher", reason="numba.cuda's real dispatcher (not the simulator)")


class StandInKernel:
    """Configured as a numba.cuda kernel is: ``kernel[blocks, threads, stream]``
    builds numba's launch configuration, which warns for grids under 128 blocks."""

    def __getitem__(self, config):
        blocks, threads, stream = config
        return dispatcher._LaunchConfiguration(self, (blocks, 1, 1), (threads, 1, 1), stream, 0)


def test_small_grids_warn_in_numba():
    # what the helpers must silence (if numba stops warning, this says so)
    with pytest.warns(Warning, match="under-utilization"):
        StandInKernel()[3, 32, 0]


def test_configured_kernels_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = gpu._configured(StandInKernel(), 3, 32, 0)
        launched = gpu._launch(StandInKernel(), 100, 0)
    assert config.griddim == (3, 1, 1) and config.blockdim == (32, 1, 1)
    assert launched.griddim[0] * launched.blockdim[0] >= 100
    # and the filter is gone afterwards: the user's own small launches still warn
    with pytest.warns(Warning, match="under-utilization"):
        StandInKernel()[3, 32, 0]


class HighlightedStandIn:
    """Configured as numba-cuda 0.30.4 configures a kernel on an H200: its
    warning's text in a terminal's bold codes."""

    def __getitem__(self, config):
        warnings.warn(
            f"\x1b[1mGrid size {config[0]} will likely result in GPU under-utilization due to low occupancy.\x1b[0m",
            RuntimeWarning,
        )
        return config


def test_highlighted_warning_is_left_out_too():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpu._configured(HighlightedStandIn(), 3, 32, 0) == (3, 32, 0)


def test_every_launch_goes_through_configured():
    # a launch is a call of a subscript, kernel[grid, block, stream](...);
    # only _configured may subscript a kernel
    tree = ast.parse(inspect.getsource(gpu))
    outside = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name != "_configured":
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                    outside.append(f"{fn.name}: {ast.unparse(node.func)}")
    assert not outside, outside
