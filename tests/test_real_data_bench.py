"""bench/real_data.py (issue 21's side-by-side table) runs end to end: a quick
pass on two generated rows, and a row whose data are missing says so."""

import time


BENCH_SCRIPT = "real_data"


def test_quick_table_on_generated_rows(bench_script, capsys, tmp_path):
    # one generated row: each baseline runs in a process of its own, and
    # every row takes the same path (the generators: tests/test_datasets.py)
    rows = bench_script.main(["--quick", "--only", "moons", "mnist5", "--timeout", "120", "--data", str(tmp_path)])
    out = capsys.readouterr().out
    assert [r["title"] for r in rows] == ["MNIST-5", "noisy moons"]
    assert "missing" in rows[0] and "mnist" in rows[0]["missing"]
    for row in rows[1:]:
        assert row["n"] == 600 and len(row["acc"]) == 1
        assert 0.0 <= row["acc"][0] <= 1.0 and row["sec"][0] > 0
        acc, nn, sec = row["spectral"]  # it finishes on 600 points
        assert 0.0 <= acc <= 1.0 and nn in bench_script.NEIGHBOURS and sec > 0
        assert 0.0 <= row["kmeans"][0] <= 1.0 and 0.0 <= row["hdbscan"][0] <= 1.0
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2
    assert "data missing" in table[2]
    assert table[3].startswith("| noisy moons | 600 | 2 | 2 |")
    assert table[3].count("|") == table[0].count("|")


def test_fastkds_alone(bench_script, capsys, tmp_path):
    rows = bench_script.main(["--quick", "--only", "moons", "--no-baselines", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert rows[0]["baselines"] is False and "spectral" not in rows[0]
    assert table[2].startswith("| noisy moons | 600 |") and table[2].count("not run") == 9
    assert table[2].count("|") == table[0].count("|")


def test_baseline_past_its_time_limit_reads_as_not_finished(bench_script):
    labels, sec = bench_script.timed_baseline(time.sleep, (10.0,), timeout=2.0)
    assert labels is None and sec is None
