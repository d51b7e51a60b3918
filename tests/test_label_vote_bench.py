"""bench/label_vote.py: the atoms-screened neighbour search is exact when
every atom's points are candidates, the vote mends a mislabelled point and
stops, and the table runs on a generated row."""

import numpy as np

BENCH_SCRIPT = "label_vote"


def test_screened_search_with_every_atom_is_exact(bench_script):
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(300, 5))
    W = Y[rng.choice(300, 12, replace=False)]
    exact = bench_script.exact_neighbours(Y, 6)
    screened = bench_script.screened_neighbours(Y, W, 6, r=12)
    # the same neighbour sets (ties have probability zero on Gaussian data)
    np.testing.assert_array_equal(np.sort(screened, axis=1), np.sort(exact, axis=1))


def test_vote_mends_a_stray_label(bench_script):
    rng = np.random.default_rng(1)
    Y = np.r_[rng.normal(0.0, 0.1, size=(50, 2)), rng.normal(5.0, 0.1, size=(50, 2))]
    truth = np.repeat([0, 1], 50)
    labels = truth.copy()
    labels[[3, 70]] = [1, 0]
    voted = bench_script.vote(labels, bench_script.exact_neighbours(Y, 5), 2)
    np.testing.assert_array_equal(voted, truth)


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--only", "mnist5", "moons", "--seeds", "1", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2 and table[2].startswith("| MNIST-5 | skipped:")
    cells = [cell.strip() for cell in table[3].strip("|").split("|")]
    assert cells[0] == "noisy moons" and all(0.5 <= float(c) <= 1.0 for c in cells[1:4] + cells[5:])
