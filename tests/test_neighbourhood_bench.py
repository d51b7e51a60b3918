"""bench/neighbourhood.py runs end to end on a generated row, and a row
whose data are missing says so."""

BENCH_SCRIPT = "neighbourhood"


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--only", "mnist5", "moons", "--neighbours", "10,5000", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2
    assert table[2].startswith("| MNIST-5 | skipped:")
    cells = [cell.strip() for cell in table[3].strip("|").split("|")]
    assert cells[:2] == ["noisy moons", "5,000"]
    assert 0.5 <= float(cells[2]) <= 1.0 and cells[3] == "-"  # 5000 neighbours: not fewer than the points
    assert 0.5 <= float(cells[4]) <= 1.0
    assert int(cells[5]) == 71 and cells[6] == "70"  # the auto atoms for n = 5000, and n / m
