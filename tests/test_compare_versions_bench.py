"""bench/compare_versions.py: the baseline package it unpacks is the
revision's, and its table's sums and ratios are those of the fits."""

import importlib
import shutil
import subprocess

import pytest

BENCH_SCRIPT = "compare_versions"


@pytest.fixture
def git_checkout(bench_script):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    inside = subprocess.run(["git", "-C", bench_script.REPO, "rev-parse", "HEAD"], capture_output=True)
    if inside.returncode != 0:
        pytest.skip("needs the repository's git checkout")
    return bench_script.REPO


def test_base_package_is_the_revision_s(bench_script, git_checkout):
    base = bench_script.base_package("HEAD")
    assert base.__name__ == "fastkds_base"
    assert base.__file__ != bench_script.fastkds.__file__
    committed = subprocess.run(
        ["git", "-C", git_checkout, "show", "HEAD:fastkds/_kernels.py"], capture_output=True, check=True
    ).stdout
    with open(importlib.import_module("fastkds_base._kernels").__file__, "rb") as f:
        assert f.read() == committed
    assert bench_script.base_package("HEAD") is base  # unpacked and imported once


def test_base_package_rejects_an_unknown_revision(bench_script, git_checkout):
    with pytest.raises(SystemExit, match="no commit"):
        bench_script.base_package("no-such-revision-anywhere")


def test_summary_sums_and_ratios(bench_script):
    # seconds[version, repeat, seed, n_jobs]
    seconds = {}
    for seed, (one, two) in enumerate([(6.0, 3.0), (8.0, 5.0), (4.0, 2.5)]):
        seconds["a", 0, seed, 1], seconds["a", 0, seed, 2] = one, two
        seconds["b", 0, seed, 1], seconds["b", 0, seed, 2] = one, one / 2
    rows = bench_script.summary(seconds, ["a", "b"], [1, 2])
    # a: 18 s against 10.5 s; fit by fit 2.0, 1.6 and 1.6
    assert rows[0] == ["a", "18.00", "10.50", "1.71x", "1.60x"]
    assert rows[1] == ["b", "18.00", "9.00", "2.00x", "2.00x"]
