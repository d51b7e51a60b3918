"""bench/few_per_class.py runs end to end: every generated row is fitted
(the code graph falls short of k modes on the blobs, and the vote finds
every class there), and the MNIST rows say their data are missing."""

BENCH_SCRIPT = "few_per_class"


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--seeds", "1", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 6
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}
    for title in ("blobs, 40 x 10, d=100, std 3", "blobs, 20 x 8, d=30, std 3"):
        assert rows[title][3] == "1.0000" and rows[title][5] == "1 of 1"
    assert rows["MNIST t10k, 10 x 10"][1].startswith("skipped:")
    assert float(rows["20 curves x 12, d=256"][3]) > 0.2
