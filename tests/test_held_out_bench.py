"""bench/held_out.py runs end to end: its rows, and a missing data folder
said in its row rather than raised."""

BENCH_SCRIPT = "held_out"


def _rows(capsys):
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]


def test_bundled_digits_row(bench_script, capsys):
    bench_script.main(["--only", "digits8x8", "--seeds", "1"])
    (row,) = _rows(capsys)
    assert row[:4] == ["digits8x8", "1,797", "64", "10"]
    assert all(0.0 <= float(row[i]) <= 1.0 for i in (4, 5, 7, 10))
    assert int(row[8]) in (5, 10, 20)


def test_mnist_rows_without_the_data_say_so(bench_script, capsys, tmp_path):
    bench_script.main(["--data", str(tmp_path), "--only", "mnist12589"])
    (row,) = _rows(capsys)
    assert row[0] == "mnist12589" and "no mnist/ folder" in row[1]
