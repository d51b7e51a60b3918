"""Epoch progress of a fit: a tqdm bar (``verbose``), or the display a
caller installs with :func:`epoch_display` (the command line does, to print
plain lines where stderr is not a terminal).

A display is a pair ``(closer, progress)``: ``progress(epoch, objective,
n_dead)`` after each epoch, ``closer.close()`` at the end of the stage, or
``(None, None)`` for none. This module imports nothing heavy, so that a
caller can install its display before scikit-learn and Numba are loaded.
"""

import contextlib
import sys

#: The installed display factory ``(estimator, desc, total) -> (closer, progress)``, or None.
_factory = None


@contextlib.contextmanager
def epoch_display(factory):
    """Within the block, fits show their epochs through ``factory``."""
    global _factory
    previous, _factory = _factory, factory
    try:
        yield
    finally:
        _factory = previous


def epochs(estimator, desc, total):
    """The display of a stage of at most ``total`` epochs: the installed
    one, else a bar when ``estimator.verbose``, else ``(None, None)``."""
    if _factory is not None:
        return _factory(estimator, desc, total)
    if not estimator.verbose:
        return None, None
    bar = EpochBar(desc, total)
    return bar, bar.update


def close(closer):
    """End a stage's display (``None``: there is none)."""
    if closer is not None:
        closer.close()


class EpochBar:
    """A tqdm bar over the epochs; it ends at the number of epochs run, not
    at the limit, when the fit converges early (37/37, not 37/100)."""

    def __init__(self, desc, total, file=None):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="epoch", file=file or sys.stderr, dynamic_ncols=True)

    def update(self, epoch, objective, n_dead):
        self.bar.update(1)
        self.bar.set_postfix(objective=f"{objective:.6g}", dead=n_dead)

    def close(self):
        if self.bar.n < self.bar.total:
            self.bar.total = self.bar.n
            self.bar.refresh()
        self.bar.close()
