"""bench/moons_accuracy.py runs end to end, at the paper's settings and with
the clusterer's defaults beside SpectralClustering."""

BENCH_SCRIPT = "moons_accuracy"


def _rows(out):
    return [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]


def test_paper_settings(bench_script, capsys):
    bench_script.main(["--n", "600", "--seeds", "1"])
    out = capsys.readouterr().out
    (row,) = _rows(out)
    assert row[0] == "0" and float(row[1]) > 0.95 and float(row[2]) > 0.95
    assert "seeds < 0.99" in out


def test_defaults_beside_spectral_clustering(bench_script, capsys):
    bench_script.main(["--defaults", "--n", "600", "--seeds", "2", "--first-seed", "300"])
    out = capsys.readouterr().out
    rows = _rows(out)
    assert [row[0] for row in rows] == ["300", "301"]
    assert all(len(row) == 6 and 0.5 <= float(row[4]) <= 1.0 for row in rows)
    assert all(float(row[1]) > 0.99 for row in rows)
    assert "Spectral" in out.splitlines()[-1]
    bench_script.main(["--defaults", "--encoder", "active-set", "--n", "600", "--seeds", "1"])
    assert "encoder='active-set'" in capsys.readouterr().out
