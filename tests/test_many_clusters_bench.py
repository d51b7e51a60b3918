"""bench/many_clusters.py runs end to end: a row of 60 blobs, fitted beside
KMeans, with SpectralClustering past its size limit left out."""

BENCH_SCRIPT = "many_clusters"


def test_table(bench_script, capsys):
    bench_script.main(["--sizes", "1200:60", "--spectral-max", "1000"])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 1
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert cells[:2] == ["1,200", "60"]
    assert cells[2] == "1.0000" and float(cells[4]) > 0.9
    assert cells[6:] == ["-", "(n > 1,000)"]
