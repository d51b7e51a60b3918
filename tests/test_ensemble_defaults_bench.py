"""bench/ensemble_defaults.py runs end to end on a generated row, and a
row whose data are missing says so."""

BENCH_SCRIPT = "ensemble_defaults"


def test_quick_table(bench_script, capsys, tmp_path):
    bench_script.main(["--quick", "--only", "mnist5", "moons", "--timeout", "120", "--data", str(tmp_path)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2
    assert table[2].startswith("| MNIST-5 | skipped:") and "mnist" in table[2]
    cells = [cell.strip() for cell in table[3].strip("|").split("|")]
    assert cells[0] == "noisy moons" and len(cells) == 1 + len(bench_script.MODELS) + 1
    for cell in cells[1:]:
        accuracy = float(cell.split(",")[0].split("/")[0])
        assert 0.5 <= accuracy <= 1.0  # two classes: a matching is never below one half
