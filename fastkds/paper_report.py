"""The report of ``fastkds paper``: the results as a Markdown table (with
the paper's numbers beside them), the circles grid, and the notes on
settings chosen by looking at accuracy.

It reads what :mod:`fastkds.experiments` measures (its ``Row``,
``Experiment`` and ``CirclesGrid``) by their fields and imports nothing of
fastkds, so the experiments import it and not the reverse.
"""

import numpy as np

#: The paper's table (accuracy of KDS, of the best other method it reports,
#: and of k-means), Tasissa et al., Table "Clustering accuracies".
PAPER = {
    "moons": {"kds": 0.999, "other": ("LLL-K", 0.950), "kmeans": 0.756},
    "moons10k": {"kds": 0.999, "other": ("LLL-K", 0.950), "kmeans": 0.756},
    "mnist5": {"kds": 0.986, "other": ("LLL-K", 0.980), "kmeans": 0.887},
    "yaleb": {"kds": 1.0, "other": ("SMCE", 1.0), "kmeans": 0.508},
    "salinas": {"kds": 0.881, "other": ("SMCE", 0.847), "kmeans": 0.774},
}
PAPER["yaleb10"] = PAPER["yaleb"]  # the same data, clustered with ten dictionaries
PAPER["salinas-lr"] = PAPER["salinas"]  # the same data, the learning rate in the data's units

#: The paper's claim checked on the circles grid: some m separates circles
#: this close with at least this accuracy.
CIRCLES_DELTA = 0.05
CIRCLES_TARGET = 0.99


def _f(x, digits=4):
    """``x`` with ``digits`` decimals; an empty cell for None."""
    return "" if x is None else f"{x:.{digits}f}"


def seed_range(exp, seeds=None, first_seed=None):
    """The seeds an Experiment or CirclesGrid runs, with the command line's overrides."""
    first = exp.first_seed if first_seed is None else first_seed
    return range(first, first + (exp.seeds if seeds is None else seeds))


def span(seeds):
    """Consecutive seeds as text: "10-19", or "3" for one."""
    seeds = list(seeds)
    return f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"


def chosen_note(exp, seeds):
    """What was chosen by looking at accuracy, on which seeds, and whether
    the figures reported on ``seeds`` are free of that choice ("" if nothing was)."""
    if not exp.chosen:
        return ""
    seen = sorted(set(seeds) & set(exp.chosen_on))
    verdict = (
        "these figures are on seeds it did not see"
        if not seen
        else f"these figures include seeds it saw ({len(seen)} of {len(list(seeds))}), so they overstate"
    )
    return f"Chosen by accuracy on seeds {span(exp.chosen_on)}: {exp.chosen}; {verdict}"


def format_notes(rows, grid=None):
    """The lines under the table, one a row (``rows`` and ``grid`` as for
    :func:`format_table`): its note, then what was chosen by looking at
    accuracy and on which seeds; "" when no row has either."""
    notes = [
        f"- {r.exp.title}: " + ". ".join(t for t in (r.exp.note, chosen_note(r.exp, r.seeds)) if t)
        for r in rows
        if r.exp.note or (r.exp.chosen and r.seeds)
    ]
    if grid is not None and grid.chosen:
        notes.append(f"- circles: {chosen_note(grid, seed_range(grid))}")
    return "\n".join(notes)


def format_table(rows, grid=None):
    """The results as a Markdown table (and the circles grid below it).

    Parameters
    ----------
    rows : list of Row
    grid : CirclesGrid or None

    Returns
    -------
    str
    """
    head = (
        "| dataset | n | d | k | m | T | lam | KDS mean | KDS min | seeds | fit s | paper KDS | "
        "paper best other | paper KMeans | KMeans | Spectral kNN | Spectral s | Bayes |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        e = r.exp
        p = PAPER.get(e.name, {})
        paper = [_f(p.get("kds"), 3), f"{p['other'][1]:.3f} ({p['other'][0]})" if p else "", _f(p.get("kmeans"), 3)]
        if r.missing:
            lines.append(
                f"| {e.title} | | | {e.k} | {e.n_atoms} | {e.n_iter} | {e.lam:g} | {r.missing} | | | | "
                + " | ".join(paper)
                + " | | | | |"
            )
            continue
        mean = lambda v: _f(np.mean(v)) if v else ""  # noqa: E731
        lines.append(
            f"| {e.title} | {r.n} | {r.d} | {e.k} | {e.n_atoms} | {e.n_iter} | {e.lam:g} | "
            f"{mean(r.accuracy)} | {_f(min(r.accuracy))} | {span(r.seeds)} | {np.mean(r.fit_seconds):.2f} | "
            + " | ".join(paper)
            + f" | {mean(r.kmeans)} | {mean(r.spectral)} | "
            f"{_f(np.mean(r.spectral_seconds), 2) if r.spectral_seconds else ''} | {mean(r.bayes)} |"
        )
    if grid is not None and grid.accuracy is not None:
        lines.append(circles_summary_line(grid))
    out = "\n".join(lines)
    if grid is not None and grid.accuracy is not None:
        out += "\n\n" + format_grid(grid)
    return out


def circles_best(grid, delta=CIRCLES_DELTA):
    """The best cell of the circles grid at separation ``delta``.

    Parameters
    ----------
    grid : CirclesGrid
        A filled grid.
    delta : float, default=0.05
        Falls back to the grid's smallest delta when not on the grid.

    Returns
    -------
    delta : float
    n_atoms : int
        The m of highest mean accuracy over the seeds.
    mean, minimum : float
        Its accuracy over the seeds.
    """
    deltas = np.asarray(grid.deltas, dtype=float)
    hit = np.flatnonzero(np.isclose(deltas, delta))
    j = int(hit[0]) if hit.size else int(np.argmin(deltas))
    mean = grid.accuracy[:, j].mean(axis=1)
    i = int(np.argmax(mean))
    return float(deltas[j]), grid.n_atoms[i], float(mean[i]), float(grid.accuracy[i, j].min())


def circles_summary_line(grid):
    """The circles row of the table: the best m at delta = 0.05."""
    delta, m, mean, low = circles_best(grid)
    return (
        f"| circles, delta={delta:g} (best m of the grid) | {grid.n_samples} | 2 | 2 | {m} | {grid.n_iter} | "
        f"{grid.lam:g} | {mean:.4f} | {low:.4f} | {span(seed_range(grid))} | {grid.seconds / grid.accuracy.size:.2f} | "
        f">= {CIRCLES_TARGET:g} (heat map) | | | | | | |"
    )


def format_grid(grid):
    """The circles heat map as a Markdown table (mean accuracy over seeds)."""
    head = "| m \\ delta | " + " | ".join(f"{d:g}" for d in grid.deltas) + " |"
    lines = [
        f"Concentric circles (n={grid.n_samples}, T={grid.n_iter}, lam={grid.lam:g}, "
        f"seeds {span(seed_range(grid))}, mean accuracy per cell):",
        "",
        head,
        "|" + "---|" * (len(grid.deltas) + 1),
    ]
    for i, m in enumerate(grid.n_atoms):
        lines.append(f"| {m} | " + " | ".join(f"{a:.3f}" for a in grid.accuracy[i].mean(axis=1)) + " |")
    return "\n".join(lines)
