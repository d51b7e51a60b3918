"""bench/fit_threads.py runs end to end and its columns add up."""

BENCH_SCRIPT = "fit_threads"


def test_table(bench_script, capsys):
    bench_script.main(["--synthetic", "1500", "--n-jobs", "1", "2", "--repeats", "1"])
    fits_table, kernels_table = capsys.readouterr().out.split("\n\n")

    def rows(table):  # the cells below the header and its rule
        lines = [line for line in table.splitlines() if line.startswith("|")][2:]
        return [[c.strip() for c in line.strip("|").split("|")] for line in lines]

    fits, kernel_rows = rows(fits_table), rows(kernels_table)
    assert [row[0] for row in fits] == ["1", "2"]
    for row in fits:
        total, kernels, rest = map(float, row[1:4])
        assert 0 < kernels < total and abs(total - kernels - rest) < 2e-3
    assert fits[0][4] == "1.00x"
    # the kernels' own medians, longest first at two threads, with their ratio
    names = [row[0] for row in kernel_rows]
    assert 0 < len(names) <= 8 and ("encode_codes_points" in names or "accumulate_statistics" in names)
    at_two = [float(row[2]) for row in kernel_rows]
    assert at_two == sorted(at_two, reverse=True)
    for row in kernel_rows:  # the ratio of the unrounded medians, each cell rounded to 0.0005
        one, two = float(row[1]), float(row[2])
        if two >= 0.01:
            low, high = max(one - 5e-4, 0.0) / (two + 5e-4), (one + 5e-4) / (two - 5e-4)
            assert low - 0.005 <= float(row[3].rstrip("x")) <= high + 0.005
