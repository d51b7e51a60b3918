"""bench/vote_recall.py: the recall of a search that finds every neighbour
is 1, and the table runs on a generated row."""

import numpy as np

BENCH_SCRIPT = "vote_recall"


def test_recall_counts_the_neighbours_found(bench_script):
    exact = np.array([[1, 2, 3], [0, 2, 3]])
    assert bench_script.recall(exact[:, ::-1], exact) == 1.0
    assert bench_script.recall(np.array([[1, 9, 9], [9, 9, 9]]), exact) == 1 / 6


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--only", "mnist5", "moons", "--probes", "1", "4", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2 and table[2].startswith("| MNIST-5 | skipped:")
    cells = [cell.strip() for cell in table[3].strip("|").split("|")]
    recalls = [float(c.split()[0]) for c in cells[2:]]
    assert cells[0] == "noisy moons" and 0.5 < recalls[0] <= recalls[1] <= 1.0
