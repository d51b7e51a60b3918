"""bench/word_counts.py runs end to end: sparse TF-IDF rows and their LSA,
each fitted beside the baselines."""

import numpy as np
import scipy.sparse as sp

BENCH_SCRIPT = "word_counts"


def test_table(bench_script, capsys):
    bench_script.main(["--n", "300", "--draws", "1", "--seeds", "1"])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]
    assert [row[0] for row in rows] == ["TF-IDF, sparse", "LSA, 100"]
    for row in rows:
        assert all(0.0 <= float(row[i]) <= 1.0 for i in (2, 3, 5, 8, 9))


def test_documents_are_unit_sparse_rows(bench_script):
    X, y = bench_script.draw(200, 0)
    assert sp.issparse(X) and X.shape == (200, bench_script.N_WORDS)
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0)
    assert set(np.unique(y)) <= set(range(bench_script.N_TOPICS)) and X.nnz / 200 > 10
