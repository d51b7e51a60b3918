"""What KDSClustering and KDSEnsembleClustering store alike in a model file
(:mod:`fastkds.persistence`): the spectral step's fitted state (``labels_``,
``embedding_``, ``kmeans_``, ``spectrum_``, ``vote_``), written, read back
and checked once for both. Each writes and reads its own dictionaries."""

import copy
import numbers
import warnings

import numpy as np
from sklearn.cluster import KMeans

from .._validation import check_positive_int
from ..label_vote import LabelVote
from ..persistence import FLOAT64, FLOATS, check_array, check_count, require
from ..spectral import BipartiteSpectrum

#: The clusterers' own fitted arrays (their scalars differ: KDSClustering
#: has ``timings_``).
ARRAYS = ("labels_", "embedding_")
_KMEANS_ARRAYS = ("cluster_centers_",)
_KMEANS_SCALARS = ("inertia_", "n_iter_", "n_features_in_")
_SPECTRUM_ARRAYS = ("eigenvalues", "eigenvectors", "used", "inv_sqrt_s")


def write_spectral_step(writer, prefix, model):
    """Write ``kmeans_``, ``spectrum_`` and ``vote_`` of a fitted clusterer.

    ``kmeans_.labels_`` is ``labels_``, and ``eigenvalues_`` is the
    spectrum's: they are stored once, and shared again on load.

    Parameters
    ----------
    writer : fastkds.persistence.Writer
    prefix : str
        The clusterer's prefix.
    model : KDSClustering or KDSEnsembleClustering
    """
    writer.params(f"{prefix}kmeans_.", model.kmeans_)
    writer.attributes(f"{prefix}kmeans_.", model.kmeans_, _KMEANS_ARRAYS, _KMEANS_SCALARS)
    spectrum, at = model.spectrum_, f"{prefix}spectrum_."
    for name in _SPECTRUM_ARRAYS:
        writer.array(at + name, getattr(spectrum, name))
    writer.json(f"{at}attributes", {"n_outlier_atoms": spectrum.n_outlier_atoms})
    writer.array(f"{at}spread", spectrum.spread)
    if spectrum.stand_in is not None:
        out, nearest = spectrum.stand_in
        writer.array(f"{at}stand_in_out", out)
        writer.array(f"{at}stand_in_nearest", nearest)
    if model.vote_ is not None:
        writer.array(f"{prefix}vote_.references", model.vote_.references)
        writer.array(f"{prefix}vote_.labels", model.vote_.labels)
        writer.json(
            f"{prefix}vote_.attributes",
            {"n_probe": model.vote_.n_probe, "n_neighbors": model.vote_.n_neighbors, "ranked": model.vote_.ranked},
        )


def read_spectral_step(reader, prefix, model, dictionaries):
    """Read ``kmeans_``, ``spectrum_`` and ``vote_`` into ``model``, and check its
    fitted state against its fitted dictionaries.

    ``model`` already holds its own fitted attributes and ``components_``,
    the atoms of ``dictionaries`` (each a fitted KDS, checked, with the same
    number of features).

    Parameters
    ----------
    reader : fastkds.persistence.Reader
    prefix : str
        The clusterer's prefix.
    model : KDSClustering or KDSEnsembleClustering
    dictionaries : list of KDS
    """
    spectrum = _read_spectrum(reader, f"{prefix}spectrum_.", model.embedding)
    kmeans = KMeans(**reader.params(f"{prefix}kmeans_.", KMeans))
    kmeans_state = reader.attributes(f"{prefix}kmeans_.", _KMEANS_ARRAYS, _KMEANS_SCALARS)
    n_atoms = sum(len(kds.components_) for kds in dictionaries)
    n_features = dictionaries[0].n_features_in_
    # the clusterer's own parameters (n_clusters, n_atoms) govern the next
    # fit; its fitted state is checked against the nested fitted models
    k = check_positive_int(model.n_clusters_, f"{prefix}n_clusters_")
    require(
        check_positive_int(model.n_features_in_, f"{prefix}n_features_in_") == n_features,
        f"{prefix}n_features_in_={model.n_features_in_!r}, but the dictionaries have {n_features} features",
    )
    check_array(model.components_, f"{prefix}components_", FLOATS, (n_atoms, n_features))
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        check_array(names, f"{prefix}feature_names_in_", "OU", (n_features,))
    columns = _check_spectrum(spectrum, f"{prefix}spectrum_.", n_atoms, k)
    labels = model.labels_
    check_array(labels, f"{prefix}labels_", "iu", (None,))
    require(
        labels.size == 0 or (labels.min() >= 0 and labels.max() < k), f"{prefix}labels_ hold labels outside 0..{k - 1}"
    )
    check_array(model.embedding_, f"{prefix}embedding_", FLOAT64, (labels.size, columns), finite=True)
    _check_kmeans(kmeans, kmeans_state, f"{prefix}kmeans_.", k, columns)
    model.spectrum_ = spectrum
    model.eigenvalues_ = spectrum.eigenvalues
    model.kmeans_ = _fitted_kmeans(kmeans, {**kmeans_state, "labels_": labels})
    model.vote_ = _read_vote(reader, f"{prefix}vote_.", model, n_features, k)


def _read_vote(reader, prefix, model, n_features, n_clusters):
    """The stored neighbours' vote, checked, or None where the model has none."""
    has_vote = reader.has(f"{prefix}references")
    require(
        has_vote == (model.vote_neighbors is not None),
        f"vote_neighbors={model.vote_neighbors!r}, but the file {'holds' if has_vote else 'lacks'} {prefix[:-1]}",
    )
    if not has_vote:
        return None
    references = reader.array(f"{prefix}references")
    check_array(references, f"{prefix}references", FLOATS, (None, n_features), finite=True)
    labels = reader.array(f"{prefix}labels")
    check_array(labels, f"{prefix}labels", "iu", (references.shape[0],))
    require(references.shape[0] > 0, f"{prefix}references is empty")
    require(labels.min() >= 0 and labels.max() < n_clusters, f"{prefix}labels hold labels outside 0..{n_clusters - 1}")
    # files written before the count of cells followed the cells' size
    # searched 4 of them: their labels_ came from that search; before the
    # vote's reach was capped (vote_reach) it was vote_neighbors; and before
    # ranked votes each neighbour had one
    n_probe, n_neighbors, ranked = 4, model.vote_neighbors, False
    if reader.has(f"{prefix}attributes"):
        attributes = reader.json(f"{prefix}attributes", ("n_probe",), optional=("n_neighbors", "ranked"))
        n_probe = check_count(attributes["n_probe"], f"{prefix}n_probe")
        n_neighbors = check_count(attributes.get("n_neighbors", n_neighbors), f"{prefix}n_neighbors")
        ranked = attributes.get("ranked", ranked)
        require(isinstance(ranked, bool), f"{prefix}ranked must be true or false, got {ranked!r}")
    require(n_probe >= 1, f"{prefix}n_probe must be at least 1, got {n_probe}")
    require(
        1 <= n_neighbors <= model.vote_neighbors,
        f"{prefix}n_neighbors must be in 1..vote_neighbors={model.vote_neighbors}, got {n_neighbors}",
    )
    return LabelVote(model.components_, references, labels, n_neighbors, n_clusters, n_probe=n_probe, ranked=ranked)


def _read_spectrum(reader, prefix, embedding):
    arrays = {name: reader.array(prefix + name) for name in _SPECTRUM_ARRAYS}
    # files written before localised modes were marked: every mode counts
    has_spread = reader.has(f"{prefix}spread")
    spread = reader.array(f"{prefix}spread") if has_spread else np.ones(arrays["eigenvalues"].size, dtype=bool)
    stand_in = None
    if reader.has(f"{prefix}stand_in_out"):
        stand_in = (reader.array(f"{prefix}stand_in_out"), reader.array(f"{prefix}stand_in_nearest"))
    return BipartiteSpectrum.from_arrays(
        **arrays,
        spread=spread,
        n_outlier_atoms=reader.json(f"{prefix}attributes", ("n_outlier_atoms",))["n_outlier_atoms"],
        stand_in=stand_in,
        embedding=embedding,
    )


def _check_spectrum(spectrum, prefix, n_atoms, n_clusters):
    """The stored eigenproblem over ``n_atoms`` atoms; returns the embedding's columns."""
    check_array(spectrum.used, f"{prefix}used", "b", (n_atoms,), meaning=" = (atoms of the dictionaries,)")
    r = int(spectrum.used.sum())
    require(r > 0, f"{prefix}used marks no atom")
    check_array(spectrum.eigenvalues, f"{prefix}eigenvalues", FLOAT64, (r,), finite=True)
    check_array(spectrum.eigenvectors, f"{prefix}eigenvectors", FLOAT64, (r, r), finite=True)
    check_array(spectrum.inv_sqrt_s, f"{prefix}inv_sqrt_s", FLOAT64, (r,), finite=True)
    require(bool((spectrum.inv_sqrt_s > 0).all()), f"{prefix}inv_sqrt_s must be > 0")
    check_array(spectrum.spread, f"{prefix}spread", "b", (r,))
    require(
        check_count(spectrum.n_outlier_atoms, f"{prefix}n_outlier_atoms") <= n_atoms,
        f"{prefix}n_outlier_atoms={spectrum.n_outlier_atoms} exceeds the {n_atoms} atoms",
    )
    if spectrum.stand_in is not None:
        out, nearest = spectrum.stand_in
        check_array(out, f"{prefix}stand_in_out", "iu", (None,))
        check_array(nearest, f"{prefix}stand_in_nearest", "iu", (out.size,))
        for name, atoms in (("stand_in_out", out), ("stand_in_nearest", nearest)):
            require(
                atoms.size == 0 or (atoms.min() >= 0 and atoms.max() < n_atoms),
                f"{prefix}{name} holds atoms outside 0..{n_atoms - 1}",
            )
    columns = spectrum.n_columns(n_clusters)
    # codes are convex weights, so a finite projection gives a finite embedding
    require(bool(np.isfinite(spectrum.projection(n_clusters)).all()), f"{prefix[:-1]} gives a non-finite embedding")
    return columns


def _check_kmeans(kmeans, state, prefix, n_clusters, columns):
    """The stored k-means (its parameters in ``kmeans``, its fitted
    attributes in ``state``) against the clusterer's ``n_clusters`` and
    the embedding's ``columns``. Its parameters are left to scikit-learn's
    own checks (:func:`_fitted_kmeans`)."""
    require(
        kmeans.n_clusters == n_clusters,
        f"{prefix}n_clusters={kmeans.n_clusters!r} differs from n_clusters_={n_clusters}",
    )
    check_array(
        state["cluster_centers_"],
        f"{prefix}cluster_centers_",
        FLOAT64,
        (n_clusters, columns),
        finite=True,
        meaning=" = (n_clusters_, columns of the embedding)",
    )
    require(
        state["n_features_in_"] == columns,
        f"{prefix}n_features_in_={state['n_features_in_']!r} differs from the embedding's {columns} columns",
    )
    check_count(state["n_iter_"], f"{prefix}n_iter_")
    inertia = state["inertia_"]
    require(
        isinstance(inertia, numbers.Real) and not isinstance(inertia, bool),
        f"{prefix}inertia_ must be a float, got {inertia!r}",
    )


def _fitted_kmeans(kmeans, state):
    """``kmeans`` (unfitted) given the fitted attributes ``state``, ready to predict.

    ``KMeans.predict`` also reads state that only ``fit`` sets, such as the
    number of threads of the machine it runs on, and scikit-learn has no
    public way to set it. So ``kmeans`` is fitted on the stored centres,
    which runs scikit-learn's own checks of its parameters too, and the
    stored attributes then replace what that fit found.
    """
    params = kmeans.get_params(deep=False)
    # a copy of a RandomState parameter, so that the stored one is not drawn from
    kmeans.set_params(**copy.deepcopy(params))
    with warnings.catch_warnings():
        # about this fit's own results, which are replaced (centres that coincide, say)
        warnings.simplefilter("ignore")
        kmeans.fit(state["cluster_centers_"])
    kmeans.set_params(**params)
    vars(kmeans).update(state)
    return kmeans
