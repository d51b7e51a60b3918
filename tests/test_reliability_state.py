"""Reliability of the estimators' state and of the files they write
(issue 22, items 1, 2, 3, 6 and 8; docs/guarantees.md).

- ``transform(X, out=folder)`` never writes into an existing file: an
  earlier result still mapped keeps its values, and a folder that holds the
  input is refused.
- Parameters changed by ``set_params`` after a fit are checked again by
  every method that reads them; the number of atoms comes from the fit.
- A fit, refit or ``partial_fit`` that fails or is interrupted leaves the
  estimator exactly as it was.
- A source read several times must give the same rows every pass; sparse
  codes with NaN are refused; float32 data of huge scale are seeded safely.
- numpy integers are accepted for every integer parameter, and nonsensical
  clustering parameters are refused.
"""

import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from fastkds import KDS, KDSClustering, KDSEnsembleClustering, project_simplex, sparse_encode
from fastkds.diskcodes import load_codes

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(n_iter=10, max_epochs=3, random_state=0, n_jobs=1)
CODE_FILES = ["data.npy", "indices.npy", "indptr.npy"]


@pytest.fixture(scope="module")
def Y():
    return np.random.default_rng(0).normal(size=(200, 3))


@pytest.fixture(scope="module")
def Y4():
    return np.random.default_rng(1).normal(size=(200, 4))


@pytest.fixture(scope="module")
def kds(Y):
    return KDS(8, **FAST).fit(Y)


def snapshot(estimator):
    """The estimator's attributes as objects, and as bytes (which see in-place changes)."""
    state = dict(vars(estimator))
    return state, pickle.dumps(state)


def assert_unchanged(estimator, snap):
    """Every attribute is the very object it was, with the same contents."""
    state, data = snap
    assert vars(estimator).keys() == state.keys()
    for name, value in state.items():
        assert vars(estimator)[name] is value, name
    assert pickle.dumps(dict(vars(estimator))) == data


def counting_source(Y, interrupt_at=None):
    """A callable source of the rows of ``Y`` in two chunks; it counts its
    passes, and raises KeyboardInterrupt on pass ``interrupt_at``."""

    def chunks():
        chunks.calls += 1
        if chunks.calls == interrupt_at:
            raise KeyboardInterrupt
        return iter([Y[:100], Y[100:]])

    chunks.calls = 0
    return chunks


# -- 1. transform(X, out=folder) ------------------------------------------------


def test_transform_out_replaces_files_and_keeps_an_earlier_mapped_result(kds, Y, tmp_path):
    """A second result written to the same folder leaves the first, still
    mapped, as it was: the files are replaced, not written into."""
    folder = tmp_path / "codes"
    first = kds.transform(Y[:60], out=folder)
    kept = [np.array(a) for a in (first.indptr, first.indices, first.data)]
    Y2 = Y[::-1] + 0.5
    second = kds.transform(Y2, out=folder)
    # the earlier arrays read only within their own (shorter) maps
    for before, now in zip(kept, (first.indptr, first.indices, first.data)):
        np.testing.assert_array_equal(np.asarray(now), before)
    np.testing.assert_array_equal(second.toarray(), kds.transform(Y2).toarray())
    np.testing.assert_array_equal(load_codes(folder, n_atoms=8).toarray(), second.toarray())
    assert sorted(os.listdir(folder)) == CODE_FILES  # no temporary file left
    umask = os.umask(0)
    os.umask(umask)
    for name in CODE_FILES:
        assert os.stat(folder / name).st_mode & 0o777 == 0o666 & ~umask


def test_transform_out_never_truncates_a_mapped_file(tmp_path):
    """The two cases that killed the process with SIGBUS: a shorter result
    written over a mapped one, and an input named like a codes file in
    ``out``. Run in a subprocess, so that a crash is a failure, not the end
    of the test run."""
    script = textwrap.dedent(
        f"""
        import os, numpy as np, warnings
        warnings.simplefilter("ignore")
        from fastkds import KDS
        Y = np.random.default_rng(0).normal(size=(200, 3))
        model = KDS(8, n_iter=10, max_epochs=3, random_state=0, n_jobs=1).fit(Y)
        folder = {str(tmp_path / "codes")!r}
        first = model.transform(Y, out=folder)
        expected = model.transform(Y).toarray()
        model.transform(Y[:10], out=folder)
        assert np.array_equal(first.toarray(), expected)
        inside = {str(tmp_path / "data")!r}
        os.makedirs(inside)
        path = os.path.join(inside, "data.npy")
        np.save(path, Y)
        try:
            model.transform(path, out=inside)
        except ValueError as exc:
            assert "holds the input" in str(exc), exc
        else:
            raise AssertionError("out holding the input was accepted")
        assert np.array_equal(np.load(path), Y)
        print("fine")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.strip() == "fine"


@pytest.mark.parametrize("as_memmap", [False, True])
def test_transform_out_refuses_the_folder_of_the_input(kds, Y, tmp_path, as_memmap):
    """``out`` holding the input file (given as a path or memory-mapped) is a
    ValueError before any encoding; the input file and folder are untouched."""
    path = tmp_path / "points.npy"
    np.save(path, Y)
    original = path.read_bytes()
    X = np.load(path, mmap_mode="r") if as_memmap else str(path)
    with pytest.raises(ValueError, match="holds the input"):
        kds.transform(X, out=tmp_path)
    assert os.listdir(tmp_path) == ["points.npy"]
    assert path.read_bytes() == original
    if as_memmap:  # a view of the memmap is read from the same file
        with pytest.raises(ValueError, match="holds the input"):
            kds.transform(np.asarray(X[:50]), out=tmp_path)


def test_failed_transform_out_keeps_the_earlier_result(kds, Y, tmp_path):
    """An error while the codes are written leaves the files of the earlier
    result in place, and no temporary files."""
    folder = tmp_path / "codes"
    kds.transform(Y, out=folder)
    before = {name: (folder / name).read_bytes() for name in CODE_FILES}
    bad = Y.copy()
    bad[150, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        kds.transform([bad[:100], bad[100:]], out=folder)  # found in the second chunk
    assert sorted(os.listdir(folder)) == CODE_FILES
    assert {name: (folder / name).read_bytes() for name in CODE_FILES} == before


# -- 2. parameters changed after fit ------------------------------------------------


def test_n_atoms_changed_after_fit_does_not_corrupt_the_codes(Y):
    """``set_params(n_atoms=4)`` on a model fitted with 8 atoms: encoding
    uses the 8 fitted atoms (a valid CSR array of 8 columns), not 4."""
    model = KDS(8, **FAST).fit(Y)
    codes = model.transform(Y)
    score = model.objective(Y)
    model.set_params(n_atoms=4)
    again = model.transform(Y)
    assert again.shape == (200, 8)
    again.check_format(full_check=True)
    np.testing.assert_array_equal(again.toarray(), codes.toarray())
    assert model.objective(Y) == score
    np.testing.assert_allclose(model.inverse_transform(again), codes @ model.components_)
    model.partial_fit(Y)  # continues with the fitted atoms
    assert model.components_.shape == (8, 3)


@pytest.mark.parametrize(
    "param, value, error",
    [
        ("n_iter", 0, ValueError),
        ("n_iter", -5, ValueError),
        ("n_iter", 2.5, TypeError),
        ("chunk_size", -3, ValueError),
        ("lam", -1.0, ValueError),
        ("lam", np.nan, ValueError),
        ("n_jobs", 0, ValueError),
        ("n_jobs", 1.5, TypeError),
        ("step", "fast", ValueError),
        ("encoder", "exact", ValueError),
        ("solver", "sgd", ValueError),
    ],
)
def test_parameters_changed_after_fit_are_checked_by_every_method(Y, param, value, error):
    """transform, objective and fit_transform check the parameters they read,
    naming the parameter; the model is left as it was."""
    model = KDS(8, **FAST).fit(Y)
    model.set_params(**{param: value})
    snap = snapshot(model)
    for method in (model.transform, model.objective, model.fit_transform):
        with pytest.raises(error, match=param):
            method(Y)
        assert_unchanged(model, snap)


# -- 3. a failed or interrupted fit changes nothing ---------------------------------


def make_estimator(kind, **params):
    if kind == "KDS":
        return KDS(8, **FAST, **params)
    if kind == "KDSClustering":
        return KDSClustering(2, n_atoms=8, **FAST, **params)
    return KDSEnsembleClustering(2, estimator=KDS(8, **FAST), n_estimators=2, random_state=0, **params)


KINDS = ["KDS", "KDSClustering", "KDSEnsembleClustering"]


def _with_init(model, atoms):
    """``model`` with atoms given as init: a fit on fewer points than those
    atoms fails after the data are validated (atoms from data would shrink)."""
    name = "estimator__init" if isinstance(model, KDSEnsembleClustering) else "init"
    return model.set_params(**{name: atoms})


@pytest.mark.parametrize("kind", KINDS)
def test_failed_first_fit_leaves_the_estimator_unfitted(kind, Y):
    """Fewer points than the atoms given as init: ValueError, and no
    attribute is set, so check_is_fitted still refuses the estimator."""
    model = _with_init(make_estimator(kind), np.zeros((8, Y.shape[1])))
    snap = snapshot(model)
    with pytest.raises(ValueError, match="n_atoms"):
        model.fit(Y[:5])
    assert_unchanged(model, snap)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)


@pytest.mark.parametrize("kind", KINDS)
def test_failed_refit_on_other_features_keeps_the_fitted_model(kind, Y, Y4):
    """Fitted on 3 features, refitted on 4 and failing: the model is the
    3-feature one, and refuses 4-feature data rather than reading out of
    bounds."""
    model = _with_init(make_estimator(kind).fit(Y), np.zeros((8, 4)))
    expected = model.transform(Y)
    snap = snapshot(model)
    with pytest.raises(ValueError, match="n_atoms"):
        model.fit(Y4[:5])
    assert_unchanged(model, snap)
    assert model.n_features_in_ == 3
    with pytest.raises(ValueError, match="features"):
        model.transform(Y4)
    np.testing.assert_array_equal(
        np.asarray(sp.csr_array(model.transform(Y)).todense()), np.asarray(sp.csr_array(expected).todense())
    )


@pytest.mark.parametrize("kind", KINDS)
def test_interrupted_refit_keeps_the_fitted_model(kind, Y, Y4):
    """A KeyboardInterrupt on the last pass over the data of a refit (after
    the dictionaries are learned) leaves the model as it was."""
    model = make_estimator(kind).fit(Y)
    probe = counting_source(Y4)
    make_estimator(kind).fit(probe)
    snap = snapshot(model)
    with pytest.raises(KeyboardInterrupt):
        model.fit(counting_source(Y4, interrupt_at=probe.calls))
    assert_unchanged(model, snap)


def test_interrupted_fit_transform_leaves_the_estimator_unfitted(Y):
    """fit_transform interrupted while encoding, after the fit: still unfitted."""
    model = KDS(8, **FAST)
    probe = counting_source(Y)
    KDS(8, **FAST).fit_transform(probe)
    snap = snapshot(model)
    with pytest.raises(KeyboardInterrupt):
        model.fit_transform(counting_source(Y, interrupt_at=probe.calls))
    assert_unchanged(model, snap)


@pytest.mark.parametrize("solver", ["exact", "unrolled"])
def test_interrupted_partial_fit_keeps_the_stream_state(Y, solver, monkeypatch):
    """A KeyboardInterrupt inside a ``partial_fit`` step, after the running
    sums (exact) or Adam's state (unrolled) were updated in place, leaves
    the model and its stream state as they were."""
    model = KDS(8, **FAST, solver=solver, batch_size=50)
    model.partial_fit(Y[:100])
    model.partial_fit(Y[100:])
    snap = snapshot(model)

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if solver == "exact":
        monkeypatch.setattr("fastkds.online.solve_dictionary", interrupt)
    else:
        from fastkds.unrolled import UnrolledTrainer

        adam_step = UnrolledTrainer.adam_step
        calls = []

        def interrupt_after_first_batch(self, batch):
            if calls:
                raise KeyboardInterrupt
            calls.append(1)
            return adam_step(self, batch)

        monkeypatch.setattr(UnrolledTrainer, "adam_step", interrupt_after_first_batch)
    with pytest.raises(KeyboardInterrupt):
        model.partial_fit(Y)
    monkeypatch.undo()
    assert_unchanged(model, snap)


def test_failed_first_partial_fit_leaves_the_estimator_unfitted(Y):
    model = KDS(8, init=np.zeros((8, Y.shape[1])), **FAST)
    snap = snapshot(model)
    with pytest.raises(ValueError, match="n_atoms"):
        model.partial_fit(Y[:5])
    assert_unchanged(model, snap)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)


def test_failed_dask_fit_leaves_the_estimator_unfitted(Y):
    da = pytest.importorskip("dask.array")
    model = KDS(8, init=np.zeros((8, Y.shape[1])), **FAST)
    snap = snapshot(model)
    with pytest.raises(ValueError, match="n_atoms"):
        model.fit(da.from_array(Y[:5], chunks=(3, 3)))
    assert_unchanged(model, snap)


# -- 6. sources, codes and scale ------------------------------------------------------


@pytest.mark.parametrize("rows", [150, 250])
def test_source_with_other_rows_on_a_later_pass_is_refused(Y, rows):
    """A callable source that gives fewer (or more) rows on a later pass
    than on the first: ValueError naming the rows, the estimator unfitted."""
    Y_long = np.random.default_rng(2).normal(size=(300, 3))

    def chunks():
        chunks.calls += 1
        n = 200 if chunks.calls <= 2 else rows
        return iter([Y_long[:100], Y_long[100:n]])

    chunks.calls = 0
    model = KDSClustering(2, n_atoms=8, **FAST)
    with pytest.raises(ValueError, match="rows"):
        model.fit(chunks)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)


def test_inverse_transform_refuses_bad_sparse_codes(kds, Y):
    """Sparse codes with NaN or inf, or with a column index past the atoms:
    ValueError, as for dense codes. The caller's codes are not modified."""
    codes = kds.transform(Y)
    for bad_value in (np.nan, np.inf):
        bad = codes.copy()
        bad.data[3] = bad_value
        with pytest.raises(ValueError, match="NaN|infinity"):
            kds.inverse_transform(bad)
    outside = sp.csr_array((np.ones(2), np.array([0, 10]), np.array([0, 1, 2])), shape=(2, 8))
    arrays = [a.copy() for a in (outside.data, outside.indices, outside.indptr)]
    with pytest.raises(ValueError, match="not a valid sparse array of codes"):
        kds.inverse_transform(outside)
    for before, now in zip(arrays, (outside.data, outside.indices, outside.indptr)):
        assert now.dtype == before.dtype
        np.testing.assert_array_equal(now, before)


def test_float32_data_of_huge_scale_are_seeded_without_overflow():
    """float32 blobs scaled by 1e18: k-means++ no longer overflows (no
    RuntimeWarning), and the clusters are found as at scale 1."""
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], 150)
    X = rng.normal(size=(300, 2)) + 10.0 * y[:, None]
    for scale in (1.0, 1e18):
        data = (X * scale).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            labels = KDSClustering(2, n_atoms=12, **FAST).fit_predict(data)
        assert abs(np.mean(labels == y) - 0.5) == 0.5  # all right, or all swapped


# -- 8. numpy integers and clustering parameters ----------------------------------------


def test_numpy_integer_n_jobs_is_accepted_everywhere(Y):
    """``n_jobs=np.int64(1)`` works as ``n_jobs=1``, like ``n_atoms=np.int64(8)``."""
    plain = KDS(8, **FAST).fit(Y)
    numpy_ints = KDS(np.int64(8), **{**FAST, "n_jobs": np.int64(1)}).fit(Y)
    np.testing.assert_array_equal(numpy_ints.components_, plain.components_)
    np.testing.assert_array_equal(numpy_ints.transform(Y).toarray(), plain.transform(Y).toarray())
    codes = sparse_encode(Y, plain.components_, n_jobs=np.int32(1))
    assert codes.shape == (200, 8)
    project_simplex(Y, n_jobs=np.int64(1))
    model = KDSEnsembleClustering(2, estimator=KDS(8, **FAST), n_estimators=2, random_state=0, n_jobs=np.int64(1)).fit(
        Y
    )
    assert model.labels_.shape == (200,)


def test_string_init_array_is_a_clear_error(Y):
    model = KDS(8, **FAST, init=np.full((8, 3), "a"))
    with pytest.raises(TypeError, match="numeric array"):
        model.fit(Y)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)


@pytest.mark.parametrize("cls", [KDSClustering, KDSEnsembleClustering])
@pytest.mark.parametrize(
    "params, match",
    [
        (dict(min_component=1.0), "min_component"),
        (dict(min_component=2.5), "min_component"),
        (dict(n_clusters="auto", max_clusters=1), "max_clusters"),
    ],
)
def test_nonsensical_clustering_parameters_are_refused(cls, params, match, Y):
    model = cls(**params)
    with pytest.raises(ValueError, match=match):
        model.fit(Y)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
