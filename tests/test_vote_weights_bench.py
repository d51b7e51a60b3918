"""bench/vote_weights.py runs end to end, its leave-one-out vote matches a
direct count, and a row whose data are missing says so."""

import numpy as np

BENCH_SCRIPT = "vote_weights"


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--only", "mnist5", "circles", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2
    assert table[2].startswith("| MNIST-5 |") and "not found" in table[2]
    circles = [cell.strip() for cell in table[3].strip("|").split("|")]
    assert circles[:2] == ["circles, delta 0.1", "6,000"]
    assert all(float(cell) > 0.99 for cell in circles[2:])  # two circles apart: every vote right


def test_leave_one_out_counts_ranked_votes(bench_script):
    # point 0's neighbours hold labels 1, 0, 0 (nearest first): one vote
    # each says 0, ranked 1 (1 against 1/2 + 1/3); point 1's 0, 0, 1: 0 either way
    y = np.array([0, 0, 1, 0])
    nearest = np.array([[2, 1, 3], [0, 3, 2], [0, 1, 3], [0, 1, 2]])
    assert bench_script.leave_one_out(nearest, y, 3, ranked=False) == 0.75  # point 2 alone is wrong
    assert bench_script.leave_one_out(nearest, y, 3, ranked=True) == 0.5  # points 0 and 2
