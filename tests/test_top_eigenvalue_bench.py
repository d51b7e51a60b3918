"""bench/top_eigenvalue.py runs end to end, and its two eigenvalues agree."""

BENCH_SCRIPT = "top_eigenvalue"


def test_table(bench_script, capsys, tmp_path):
    bench_script.main(["--data", str(tmp_path), "--atoms", "16", "200", "--repeats", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")][2:]
    assert [row.split("|")[1].strip() for row in rows] == ["Gaussian, d=50"] * 2 + ["moons, d=2"] * 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[2]) > 0 and float(cells[3]) > 0
        assert abs(float(cells[4])) < 1e-12
