"""bench/fit_threads.py runs end to end and its columns add up."""

BENCH_SCRIPT = "fit_threads"


def test_table(bench_script, capsys):
    bench_script.main(["--synthetic", "1500", "--n-jobs", "1", "2", "--repeats", "1"])
    out = capsys.readouterr().out.splitlines()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out if line.startswith("|")][2:]
    assert [row[0] for row in rows] == ["1", "2"]
    for row in rows:
        total, kernels, rest = map(float, row[1:4])
        assert 0 < kernels < total and abs(total - kernels - rest) < 2e-3
    assert rows[0][4] == "1.00x"
    assert "encode_codes" in out[-1] or "accumulate_statistics" in out[-1]
