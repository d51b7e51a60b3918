"""bench/unequal_classes.py runs end to end: the generated rows are
fitted with both embeddings beside the baselines, and the MNIST rows say
their data are missing."""

BENCH_SCRIPT = "unequal_classes"


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--seeds", "1", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 5
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}
    assert rows["blobs of 8 and 92, d=10"][1:4] == ["100", "2", "92 / 8"]
    assert rows["blobs of 8 and 92, d=10"][4] == "1.0000"
    moons = rows["moons, one thinned to 15%"]
    assert moons[2] == "2" and all(0.5 <= float(cell) <= 1.0 for cell in moons[4:9])
    for title in ("MNIST 0-4, 800 to 50", "MNIST 10 digits, 850 to 85", "MNIST 10 digits, 850 to 283"):
        assert rows[title][1].startswith("skipped:")


def test_thinned_moons_keeps_one_moon_whole(bench_script):
    Y, y = bench_script.thinned_moons(4000, 0.15, 0)
    counts = [int((y == c).sum()) for c in (0, 1)]
    assert counts[0] == 2000 and 200 < counts[1] < 400 and Y.shape == (sum(counts), 2)
