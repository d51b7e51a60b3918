"""``fastkds.load`` on damaged and crafted model files: it refuses every
inconsistent file with a ValueError naming it, and every model it returns
gives well-formed output (docs/guarantees.md, Model files)."""

import json
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

import fastkds
from fastkds import KDS, KDSClustering, KDSEnsembleClustering, make_moons

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning",
    # a crafted feature_names_in_ makes scikit-learn warn that X has no names
    "ignore:X does not have valid feature names:UserWarning",
    # a crafted device="auto" falls back to the CPU with a warning
    "ignore:device='auto':RuntimeWarning",
)


@pytest.fixture(scope="module")
def moons():
    Y, _ = make_moons(300, random_state=0)
    return Y


@pytest.fixture(scope="module")
def outlier_data():
    # far outliers own atoms: the spectrum then stores outlier stand-ins
    rng = np.random.default_rng(0)
    return np.r_[rng.normal(size=(150, 2)), rng.normal(size=(150, 2)) + [10, 0], rng.normal(size=(6, 2)) * 200]


@pytest.fixture(scope="module")
def models(moons, outlier_data):
    """One fitted model of each class, small; the KDS in float32 with a
    RandomState parameter, so that every kind of entry is in some file."""
    kds = KDS(6, lam=5.0, n_iter=10, max_epochs=3, random_state=np.random.RandomState(0))
    clustering = KDSClustering(2, n_atoms=16, lam=1.0, n_iter=10, max_epochs=3, random_state=0)
    ensemble = KDSEnsembleClustering(
        2, estimator=KDS(6, lam=5.0, n_iter=10, max_epochs=3), n_estimators=2, random_state=0
    )
    models = {
        "KDS": kds.fit(moons.astype(np.float32)),
        "KDSClustering": clustering.fit(outlier_data),
        "KDSEnsembleClustering": ensemble.fit(moons),
    }
    assert models["KDSClustering"].spectrum_.stand_in is not None
    return models


@pytest.fixture(scope="module")
def saved(models, tmp_path_factory):
    """The npz entries of each model's file."""
    folder = tmp_path_factory.mktemp("saved")
    entries = {}
    for name, model in models.items():
        model.save(folder / f"{name}.npz")
        with np.load(folder / f"{name}.npz", allow_pickle=False) as npz:
            entries[name] = {key: npz[key] for key in npz.files}
    return entries


def _write(path, entries):
    with open(path, "wb") as f:
        np.savez(f, **entries)
    return path


def _edit_json(entries, name, edit):
    spec = json.loads(str(entries[name]))
    edit(spec)
    return {**entries, name: np.array(json.dumps(spec))}


def _refused(path, match):
    with pytest.raises(ValueError, match=match) as excinfo:
        fastkds.load(path)
    assert str(path) in str(excinfo.value)


# -- the faults, one by one ---------------------------------------------------------


@pytest.mark.parametrize("n_atoms", [3, 40])
def test_crafted_n_atoms_gives_codes_over_the_stored_atoms(saved, moons, tmp_path, n_atoms):
    """docs/guarantees.md, Model files: n_atoms is the count the next fit
    learns; the model encodes with the stored atoms, whatever it says."""
    entries = _edit_json(saved["KDS"], "params", lambda s: s["values"].update(n_atoms=n_atoms))
    model = fastkds.load(_write(tmp_path / "m.npz", entries))
    assert model.n_atoms == n_atoms
    codes = model.transform(moons[:50])
    assert codes.shape == (50, 6)
    codes.check_format(full_check=True)  # column indices < 6


def test_crafted_n_features_in_is_refused(saved, tmp_path):
    """docs/guarantees.md, Model files: n_features_in_ must match the atoms."""
    entries = _edit_json(saved["KDS"], "attributes", lambda s: s.update(n_features_in_=5))
    _refused(_write(tmp_path / "m.npz", entries), r"expected \(any, 5\) = \(atoms, n_features_in_\)")


@pytest.mark.parametrize("shape", [(6, 1), (6, 3), (12,), (0, 2)])
def test_crafted_components_shape_is_refused(saved, tmp_path, shape):
    """docs/guarantees.md, Model files: components_ must be (atoms, n_features_in_)."""
    entries = {**saved["KDS"], "components_": np.ones(shape, dtype=np.float32)}
    _refused(_write(tmp_path / "m.npz", entries), "components_ (has shape|holds no atom)")


def test_crafted_nested_components_shape_is_refused(saved, tmp_path):
    """docs/guarantees.md, Model files: the same for a clusterer's dictionary."""
    entries = {**saved["KDSClustering"], "kds_.components_": np.ones((16, 5))}
    _refused(_write(tmp_path / "m.npz", entries), "kds_.components_ has shape")


@pytest.mark.parametrize("which", ["KDSClustering", "KDSEnsembleClustering"])
@pytest.mark.parametrize("shape", [(2, 7), (3, 2), (2,)])
def test_crafted_kmeans_centres_shape_is_refused(saved, tmp_path, which, shape):
    """docs/guarantees.md, Model files: the k-means centres must be
    (n_clusters_, columns of the embedding)."""
    entries = {**saved[which], "kmeans_.cluster_centers_": np.zeros(shape)}
    _refused(_write(tmp_path / "m.npz", entries), "kmeans_.cluster_centers_ has shape")


def test_crafted_labels_out_of_range_are_refused(saved, tmp_path):
    """docs/guarantees.md, Model files: labels_ lie in 0..n_clusters_-1."""
    labels = saved["KDSClustering"]["labels_"].copy()
    labels[0] = 7
    _refused(_write(tmp_path / "m.npz", {**saved["KDSClustering"], "labels_": labels}), "labels outside 0..1")


def test_crafted_spectrum_is_refused(saved, tmp_path):
    """docs/guarantees.md, Model files: the eigenproblem covers every atom."""
    entries = {**saved["KDSClustering"], "spectrum_.used": np.ones(3, dtype=bool)}
    _refused(_write(tmp_path / "m.npz", entries), r"spectrum_.used has shape \(3,\), expected \(16,\)")


def test_crafted_ensemble_dictionary_is_refused(saved, tmp_path):
    """docs/guarantees.md, Model files: the eigenproblem covers the atoms of
    every dictionary of an ensemble."""
    atoms = saved["KDSEnsembleClustering"]["estimators_.1.components_"]
    entries = {**saved["KDSEnsembleClustering"], "estimators_.1.components_": atoms[:4]}
    _refused(_write(tmp_path / "m.npz", entries), r"spectrum_.used has shape \(12,\), expected \(10,\)")


def test_corrupted_file_is_a_value_error(saved, models, tmp_path):
    """docs/guarantees.md, Model files: a bad checksum is a ValueError, not BadZipFile."""
    path = tmp_path / "m.npz"
    models["KDS"].save(path)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("components_.npy")
    # a byte of the array's data, past the local header and the .npy header
    raw[info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size - 1] ^= 0xFF
    path.write_bytes(bytes(raw))
    _refused(path, r"damaged: entry 'components_' cannot be read \(Bad CRC-32")


@pytest.mark.parametrize("prefix", ["", "kds_.", "kmeans_."])
def test_unknown_parameter_is_a_value_error(saved, tmp_path, prefix):
    """docs/guarantees.md, Model files: unknown parameters are a ValueError, not TypeError."""
    entries = _edit_json(saved["KDSClustering"], f"{prefix}params", lambda s: s["values"].update(bogus=1))
    _refused(_write(tmp_path / "m.npz", entries), rf"unknown parameters \['bogus'\] .* in '{prefix}params'")


@pytest.mark.parametrize(
    "name, value, match",
    [
        ("lam", -1.0, "lam must be finite and >= 0"),
        ("n_iter", 0, "n_iter must be >= 1"),
        ("n_iter", 2.5, "n_iter must be an integer"),
        ("chunk_size", -3, "chunk_size must be >= 1"),
        ("step", "fast", "step must be one of"),
        ("device", "tpu", "device must be one of"),
        ("init", "best", "init must be"),
    ],
)
def test_invalid_parameter_is_a_value_error(saved, tmp_path, name, value, match):
    """docs/guarantees.md, Model files: parameters pass the estimators' own validation."""
    entries = _edit_json(saved["KDS"], "params", lambda s: s["values"].update({name: value}))
    _refused(_write(tmp_path / "m.npz", entries), match)


def test_random_state_position_out_of_range_is_refused(saved, tmp_path):
    """docs/guarantees.md, Model files: a stored RandomState's position must
    lie inside its key (numpy does not check it, and reads past the key)."""
    entries = _edit_json(saved["KDS"], "params", lambda s: s["random_states"]["random_state"].update(pos=10**6))
    _refused(_write(tmp_path / "m.npz", entries), "pos=1000000 exceeds 624")


def test_save_refuses_what_load_would_refuse(models, tmp_path):
    """docs/guarantees.md, Model files: save refuses a model whose fitted
    state is inconsistent or whose parameters are invalid, so it never
    writes a file load refuses."""
    model = KDS(6, lam=5.0, n_iter=10, max_epochs=3, random_state=0).fit(make_moons(100, random_state=0)[0])
    atoms = model.components_
    model.components_ = atoms[:, :1]
    with pytest.raises(ValueError, match=r"cannot save this KDS: components_ has shape \(6, 1\), expected \(any, 2\)"):
        model.save(tmp_path / "m.npz")
    model.components_ = atoms
    model.set_params(lam=-1.0)
    with pytest.raises(ValueError, match="cannot save this KDS: lam must be finite and >= 0"):
        model.save(tmp_path / "m.npz")
    assert list(tmp_path.iterdir()) == []


# -- crafted files -------------------------------------------------------------------

_JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "auto",
            "paper",
            "centred",
            "apg",
            "active-set",
            "exact",
            "unrolled",
            "random",
            "k-means++",
            "lloyd",
            "MT19937",
            "",
            "x",
        ]
    ),
    st.lists(st.sampled_from(["init", "n_atoms", "random_state", "estimator", "bogus"]), max_size=2),
    st.just({}),
)

_DTYPES = ["int32", "int64", "float32", "float64", "bool", "complex128", ">f8", "<U3", "uint32"]


@st.composite
def _array_edit(draw, value):
    """``value`` with its shape, dtype or values changed."""
    kind = draw(st.sampled_from(["shape", "dtype", "element", "scale", "replace"]))
    if kind == "shape" and value.ndim:
        how = draw(st.sampled_from(["drop", "extend", "transpose", "flatten", "add-axis", "scalar"]))
        if how == "drop":
            return value[: draw(st.integers(0, max(0, len(value) - 1)))]
        if how == "extend":
            return np.concatenate([value, value[:1]]) if len(value) else np.zeros((1,) + value.shape[1:], value.dtype)
        if how == "transpose":
            return value.T
        if how == "flatten":
            return value.ravel()
        if how == "add-axis":
            return value[None]
        return value.ravel()[:1].reshape(()) if value.size else np.array(0, value.dtype)
    if kind == "dtype":
        try:
            with np.errstate(all="ignore"):
                return value.astype(draw(st.sampled_from(_DTYPES)))
        except (ValueError, TypeError, OverflowError):
            return value
    if kind in ("element", "scale") and value.size and value.dtype.kind in "biuf":
        new = value.copy()
        special = draw(st.sampled_from([np.nan, np.inf, -np.inf, -1, 0, 1e300, 2**31 - 1, 1e-300, 3]))
        index = draw(st.integers(0, value.size - 1))
        with np.errstate(all="ignore"):
            try:
                if kind == "element":
                    new.flat[index] = special
                else:
                    new = new * special
            except (ValueError, OverflowError, TypeError):  # no such value in this dtype
                pass
        return new
    shape = draw(st.lists(st.integers(0, 4), max_size=3).map(tuple))
    return np.zeros(shape, dtype=draw(st.sampled_from(["float64", "int64", "bool"])))


def _json_edit(draw, text):
    """A JSON entry with a key set, removed or added, or the text broken."""
    kind = draw(st.sampled_from(["set", "set", "remove", "broken"]))
    if kind == "broken":
        return np.array(draw(st.sampled_from(["", "{", "[1, 2]", "null", '"text"', "[" * 5000])))
    try:
        spec = json.loads(str(text))
    except (ValueError, RecursionError):  # broken by an earlier edit
        return text
    if not isinstance(spec, dict):
        return text
    target = spec
    if isinstance(spec.get("values"), dict) and draw(st.booleans()):
        target = spec["values"]
    elif isinstance(spec.get("random_states"), dict) and spec["random_states"] and draw(st.booleans()):
        target = next(iter(spec["random_states"].values()))
    key = draw(st.sampled_from(sorted(target) + ["bogus"]))
    if kind == "remove":
        target.pop(key, None)
    else:
        target[key] = draw(_JSON_VALUES)
    return np.array(json.dumps(spec))


def _crafted(draw, entries):
    """``entries`` with one to three random edits."""
    entries = dict(entries)
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(entries)))
        value = entries[name]
        kind = draw(st.sampled_from(["edit", "edit", "edit", "remove", "add"]))
        if kind == "remove":
            del entries[name]
        elif kind == "add":
            extra = draw(st.sampled_from(["bogus", "feature_names_in_", "kds_.feature_names_in_"]))
            entries[extra] = draw(st.sampled_from([np.zeros(3), np.array(["a", "b"]), np.array(["a"])]))
        elif value.dtype.kind == "U" and value.shape == () and name.endswith(("params", "attributes")):
            entries[name] = _json_edit(draw, value)
        else:
            entries[name] = draw(_array_edit(value))
    return entries


def _assert_well_formed(model, Y):
    """Outputs of a loaded model: codes a valid CSR array with rows on the
    simplex, labels in range. A ValueError that says to rescale (atoms or
    parameters far out of the data's scale) is a clear error, not a fault."""
    try:
        check_is_fitted(model)
    except NotFittedError:
        return
    try:
        if isinstance(model, KDS):
            codes = model.transform(Y)
            assert sp.issparse(codes) and codes.format == "csr"
            assert codes.shape == (len(Y), model.components_.shape[0])
            codes.check_format(full_check=True)  # indptr, and column indices < n_atoms
            assert np.isfinite(codes.data).all() and (codes.data >= 0).all()
            np.testing.assert_allclose(codes.sum(axis=1), 1.0, atol=1e-3)
            return
        labels = model.predict(Y)
        assert labels.shape == (len(Y),) and labels.dtype.kind in "iu"
        assert labels.min() >= 0 and labels.max() < model.n_clusters_
        embedding = model.transform(Y)
        assert embedding.shape == (len(Y), model.kmeans_.cluster_centers_.shape[1])
        assert np.isfinite(embedding).all()
    except ValueError as exc:
        assert "rescale" in str(exc), exc


@pytest.mark.parametrize("which", ["KDS", "KDSClustering", "KDSEnsembleClustering"])
# no "explain" phase: its tracing makes a failure take minutes to report
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
@given(data=st.data())
def test_crafted_file_is_refused_or_gives_well_formed_output(saved, moons, tmp_path, which, data):
    """docs/guarantees.md, Model files: random edits of the shapes,
    parameters and arrays of a saved model. load raises ValueError naming
    the file, or returns a model whose outputs are well-formed."""
    path = _write(tmp_path / "crafted.npz", _crafted(data.draw, saved[which]))
    try:
        model = fastkds.load(path)
    except ValueError as exc:
        assert str(path) in str(exc)
        return
    _assert_well_formed(model, moons[:100])
