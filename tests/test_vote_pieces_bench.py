"""bench/vote_pieces.py runs end to end on generated rows (one graph in one
piece, one in two), and a row whose data are missing says so."""

BENCH_SCRIPT = "vote_pieces"


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--only", "mnist5", "moons", "circles", "--seeds", "1", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 3
    assert table[2].startswith("| MNIST-5 | skipped:")
    moons = [cell.strip() for cell in table[3].strip("|").split("|")]
    assert moons[:4] == ["noisy moons", "-", "1", "the rule does not apply"]
    circles = [cell.strip() for cell in table[4].strip("|").split("|")]
    assert circles[:3] == ["circles, delta 0.1", "0", "2 (3,000, 3,000)"]
    label_threshold, cell_threshold = (float(x) for x in circles[6].split(","))
    assert label_threshold == 300.0 and cell_threshold < label_threshold  # n / (10 k), n / (10 m)
    # the atoms are coarser than the gap: labels and cells both cross it
    assert float(circles[3].replace(",", "")) > label_threshold
    assert float(circles[4].replace(",", "")) > cell_threshold and int(circles[5]) > 0
    assert float(circles[7]) == 1.0
