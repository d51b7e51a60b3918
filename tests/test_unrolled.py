"""The unrolled solver (SPEC 5b): the hand-written backward pass against
finite differences and against the NumPy oracle, its determinism, the
bounded trainable step, and ``KDS(solver="unrolled")``."""

import copy

import numba
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastkds import KDS, KDSClustering, _naive, clustering_accuracy, load, make_moons
from fastkds._config import numba_threads
from fastkds.unrolled import (
    STEP_BOUND,
    loss_and_gradient,
    loss_and_gradient_fixed_step,
    step_size,
    theta_from_step,
)

PROBLEMS = [
    # (seed, n, d, m, T, lam)
    (0, 30, 2, 5, 8, 1.0),
    (1, 25, 4, 7, 15, 0.3),
    (2, 40, 3, 6, 1, 2.0),
    (3, 20, 5, 4, 30, 0.0),
    (4, 35, 2, 9, 12, 5.0),
]


def _problem(seed, n, d, m, dtype=np.float64):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(n, d))
    W = Y[rng.choice(n, m, replace=False)] + 0.1 * rng.normal(size=(m, d))
    return Y.astype(dtype), W


def _rel(a, b):
    return np.linalg.norm(np.ravel(a) - np.ravel(b)) / max(np.linalg.norm(np.ravel(b)), 1e-300)


@pytest.mark.parametrize("theta", [None, 0.4], ids=["fixed_step", "trainable_step"])
@pytest.mark.parametrize("problem", PROBLEMS, ids=[f"seed{p[0]}" for p in PROBLEMS])
def test_gradient_matches_central_differences(problem, theta):
    seed, n, d, m, T, lam = problem
    Y, W = _problem(seed, n, d, m)
    f, gW, gt, _ = loss_and_gradient(Y, W, lam, T, theta)
    h = 1e-6
    fd = np.empty_like(W)
    for idx in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[idx] = h
        fd[idx] = (loss_and_gradient(Y, W + E, lam, T, theta)[0] - loss_and_gradient(Y, W - E, lam, T, theta)[0]) / (
            2 * h
        )
    if theta is None:
        assert _rel(gW, fd) < 1e-6
    else:
        # theta is O(1) and the loss barely depends on it: a larger h keeps
        # the rounding of the difference (~1e-16 / h) below the tolerance
        ht = 1e-4
        fdt = (loss_and_gradient(Y, W, lam, T, theta + ht)[0] - loss_and_gradient(Y, W, lam, T, theta - ht)[0]) / (
            2 * ht
        )
        assert _rel(np.r_[gW.ravel(), gt], np.r_[fd.ravel(), fdt]) < 1e-6
        assert abs(gt - fdt) <= 1e-4 * abs(fdt)


@pytest.mark.parametrize("problem", PROBLEMS, ids=[f"seed{p[0]}" for p in PROBLEMS])
def test_step_derivative_matches_central_differences(problem):
    seed, n, d, m, T, lam = problem
    Y, W = _problem(seed, n, d, m)
    alpha = 0.9 / np.linalg.norm(W, 2) ** 2
    _, _, ga = loss_and_gradient_fixed_step(Y, W, lam, T, alpha)
    h = 1e-4 * alpha  # the loss is O(1), its alpha-derivative small: rounding needs a larger h
    fp = loss_and_gradient_fixed_step(Y, W, lam, T, alpha + h)[0]
    fm = loss_and_gradient_fixed_step(Y, W, lam, T, alpha - h)[0]
    fd = (fp - fm) / (2 * h)
    assert abs(ga - fd) <= 1e-6 * max(abs(fd), 1e-12)


@pytest.mark.parametrize("problem", PROBLEMS, ids=[f"seed{p[0]}" for p in PROBLEMS])
def test_kernel_matches_numpy_oracle_float64(problem):
    seed, n, d, m, T, lam = problem
    Y, W = _problem(seed, n, d, m)
    alpha = 1.0 / np.linalg.norm(W, 2) ** 2
    f, gW, ga = loss_and_gradient_fixed_step(Y, W, lam, T, alpha)
    f0, gW0, ga0 = _naive.unrolled_loss_grad(Y, W, lam, T, alpha)
    assert abs(f - f0) <= 1e-10 * abs(f0)
    assert _rel(gW, gW0) < 1e-10
    assert abs(ga - ga0) <= 1e-10 * max(abs(ga0), 1e-300)


@pytest.mark.parametrize("problem", PROBLEMS[:3], ids=[f"seed{p[0]}" for p in PROBLEMS[:3]])
def test_kernel_float32_matches_oracle(problem):
    seed, n, d, m, T, lam = problem
    Y, W = _problem(seed, n, d, m)
    alpha = 1.0 / np.linalg.norm(W, 2) ** 2
    f, gW, ga = loss_and_gradient_fixed_step(Y.astype(np.float32), W, lam, T, alpha)
    # the oracle on the data as float32 holds, in float64
    f0, gW0, ga0 = _naive.unrolled_loss_grad(Y.astype(np.float32).astype(np.float64), W, lam, T, alpha)
    assert abs(f - f0) <= 1e-4 * abs(f0)
    assert _rel(gW, gW0) < 1e-3
    assert abs(ga - ga0) <= 1e-3 * abs(ga0)


def test_kernel_matches_oracle_on_mnist_like_shapes():
    # many atoms, an iterate that starts dense: the O(nnz^2) bookkeeping of
    # the backward pass over large supports
    rng = np.random.default_rng(7)
    Y = rng.random((50, 30))
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    W = Y[rng.choice(50, 40, replace=False)]
    alpha = 1.0 / np.linalg.norm(W, 2) ** 2
    f, gW, ga = loss_and_gradient_fixed_step(Y, W, 0.5, 25, alpha)
    f0, gW0, ga0 = _naive.unrolled_loss_grad(Y, W, 0.5, 25, alpha)
    assert abs(f - f0) <= 1e-10 * abs(f0)
    assert _rel(gW, gW0) < 1e-10
    assert abs(ga - ga0) <= 1e-10 * abs(ga0)


def test_gradient_is_identical_for_any_thread_count():
    Y, W = _problem(5, 700, 3, 12)
    alpha = 1.0 / np.linalg.norm(W, 2) ** 2
    results = []
    for n_jobs in (1, numba.config.NUMBA_NUM_THREADS):
        with numba_threads(n_jobs):
            results.append(loss_and_gradient_fixed_step(Y, W, 1.0, 10, alpha))
    assert results[0][0] == results[1][0]
    assert np.array_equal(results[0][1], results[1][1])
    assert results[0][2] == results[1][2]


def test_loss_is_the_encoder_objective():
    # the forward pass is the encoder: the loss is the objective of its codes
    Y, W = _problem(6, 60, 2, 8)
    f, _, _, alpha = loss_and_gradient(Y, W, 2.0, 10)
    X = _naive.encode(Y, W, 2.0, 10, step="paper")
    assert f == pytest.approx(_naive.objective(Y, W, X, 2.0).mean(), rel=1e-12)
    assert alpha == pytest.approx(_naive.step_size(W, "paper"), rel=1e-12)


def test_trainable_step_is_bounded():
    _, W = _problem(0, 30, 2, 6)
    top = np.linalg.norm(W, 2) ** 2
    assert step_size(W, theta=60.0) <= STEP_BOUND / top
    assert step_size(W, theta=-60.0) > 0
    # it starts at the fixed step, and theta_from_step inverts it
    from fastkds.unrolled import initial_theta

    assert step_size(W, initial_theta()) == pytest.approx(1.0 / top, rel=1e-12)
    assert theta_from_step(W, step_size(W, 0.3)) == pytest.approx(0.3, rel=1e-9)


# -- the estimator -------------------------------------------------------------


def _moons_model(**kw):
    params = dict(
        n_atoms=24,
        lam=5.0,
        n_iter=15,
        solver="unrolled",
        max_epochs=150,
        batch_size=2000,
        learning_rate=1e-2,
        init="random",
        random_state=0,
    )
    params.update(kw)
    return KDS(**params)


def test_unrolled_fit_lowers_the_objective_and_clusters_moons():
    Y, y = make_moons(2000, random_state=1)
    model = KDSClustering(2, **_moons_model().get_params()).fit(Y)
    obj = model.kds_.objective_
    assert obj.shape == (150,)
    assert obj[-1] < 0.75 * obj[0]
    assert clustering_accuracy(y, model.labels_) >= 0.99


def test_learned_step_is_used_by_transform_and_survives_save(tmp_path):
    Y, _ = make_moons(600, random_state=2)
    model = _moons_model(train_step=True, max_epochs=40, learning_rate=5e-2, batch_size=200).fit(Y)
    W = model.components_
    top = np.linalg.norm(W, 2) ** 2
    assert model.step_ != pytest.approx(1.0 / top, rel=1e-3)  # it did train
    assert model.step_ < STEP_BOUND / top
    codes = model.transform(Y).toarray()
    ref = _naive.encode(Y, W, 5.0, 15, alpha=model.step_, step="paper")
    assert np.abs(codes - ref).max() < 1e-10
    model.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    assert loaded.solver == "unrolled" and loaded.train_step
    assert (loaded.transform(Y) != model.transform(Y)).nnz == 0


def test_frozen_step_is_the_initial_dictionarys(tmp_path):
    # the paper's released code: a fixed step is 1/sigma_max(W_0)^2, held
    # through training and encoding while the atoms move
    Y, _ = make_moons(600, random_state=6)
    W0 = Y[np.random.default_rng(0).choice(600, 24, replace=False)]
    model = _moons_model(init=W0, freeze_step=True, max_epochs=30, learning_rate=5e-2, batch_size=200).fit(Y)
    step0 = 1.0 / np.linalg.norm(W0, 2) ** 2
    assert model.step_ == pytest.approx(step0, rel=1e-12)
    W = model.components_
    assert model.step_ != pytest.approx(1.0 / np.linalg.norm(W, 2) ** 2, rel=1e-2)  # the atoms did move
    assert model.objective_[-1] < model.objective_[0]
    codes = model.transform(Y).toarray()
    assert np.abs(codes - _naive.encode(Y, W, 5.0, 15, alpha=step0, step="paper")).max() < 1e-10
    model.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    assert loaded.freeze_step and loaded.step_ == model.step_
    assert (loaded.transform(Y) != model.transform(Y)).nnz == 0
    model.partial_fit(Y)  # continues with the same step
    assert model.step_ == pytest.approx(step0, rel=1e-12)
    assert not np.array_equal(model.components_, W)


def test_frozen_step_training_follows_the_fixed_step_gradient():
    Y, _ = make_moons(200, random_state=7)
    W0 = Y[:8].copy()
    step0 = 1.0 / np.linalg.norm(W0, 2) ** 2
    model = _moons_model(
        n_atoms=8, init=W0, freeze_step=True, max_epochs=1, batch_size=200, shuffle=False, learning_rate=1e-3
    ).fit(Y)
    f, g, _ = loss_and_gradient_fixed_step(Y, W0, 5.0, 15, step0)
    assert model.objective_[0] == pytest.approx(f, rel=1e-12)
    # Adam's first step moves each coordinate by the learning rate times the sign of its gradient
    moved = np.sign(W0 - model.components_)
    assert np.array_equal(moved[np.abs(g) > 1e-6], np.sign(g)[np.abs(g) > 1e-6])


@pytest.mark.parametrize("scale", [1.0, 3.7e-5])
def test_adam_kernel_is_the_numpy_update_bit_for_bit(scale):
    from fastkds._unrolled_kernels import adam_update

    rng = np.random.default_rng(8)
    W, g, m = rng.normal(size=(3, 7, 11))
    v = rng.random((7, 11))
    lr, b1, b2, eps, k = 1e-3, 0.9, 0.999, 1e-8, 5
    c1, c2 = 1 - b1**k, 1 - b2**k
    # the NumPy form: clip, then the moments, then the step
    gs = g * scale
    m_ref = m * b1 + (1.0 - b1) * gs
    v_ref = v * b2 + (1.0 - b2) * gs * gs
    W_ref = W - lr * (m_ref / c1) / (np.sqrt(v_ref / c2) + eps)
    adam_update(W, g, m, v, scale, lr, b1, b2, c1, c2, eps)
    for got, ref in ((W, W_ref), (m, m_ref), (v, v_ref)):
        np.testing.assert_array_equal(got, ref)


def test_unrolled_fit_float32():
    Y, _ = make_moons(500, random_state=3)
    model = _moons_model(max_epochs=20, batch_size=128).fit(Y.astype(np.float32))
    assert model.components_.dtype == np.float32
    assert np.all(np.isfinite(model.objective_))
    assert model.objective_[-1] < model.objective_[0]


def test_unrolled_fit_is_reproducible_and_thread_independent():
    Y, _ = make_moons(800, random_state=4)
    a = _moons_model(max_epochs=5, batch_size=100, n_jobs=1).fit(Y)
    b = _moons_model(max_epochs=5, batch_size=100, n_jobs=2).fit(Y)
    assert np.array_equal(a.components_, b.components_)


def test_unrolled_fit_does_not_modify_input():
    Y, _ = make_moons(300, random_state=5)
    Y0 = Y.copy()
    _moons_model(max_epochs=3, batch_size=64).fit(Y)
    assert np.array_equal(Y, Y0)


@pytest.mark.parametrize(
    "params, error",
    [
        ({"solver": "sgd"}, ValueError),
        ({"learning_rate": 0.0}, ValueError),
        ({"learning_rate": "fast"}, TypeError),
        ({"clip_norm": -1.0}, ValueError),
        ({"batch_size": 0}, ValueError),
        ({"batch_size": 2.5}, TypeError),
        ({"shuffle": "yes"}, TypeError),
        ({"train_step": 1}, TypeError),
        ({"freeze_step": "yes"}, TypeError),
        ({"freeze_step": True, "train_step": True}, ValueError),
    ],
)
def test_bad_solver_parameters_fail_clearly(params, error):
    Y, _ = make_moons(100, random_state=0)
    with pytest.raises(error, match=next(iter(params))):
        KDS(4, solver="unrolled", max_epochs=1).set_params(**params).fit(Y)


@parametrize_with_checks(
    [
        KDS(n_atoms=4, max_epochs=3, solver="unrolled", batch_size=16, random_state=0),
        KDS(n_atoms=4, max_epochs=3, solver="unrolled", train_step=True, random_state=0),
    ]
)
def test_sklearn_compatible_unrolled(estimator, check):
    check(estimator)


def test_diverging_learning_rate_gets_a_clear_error_and_leaves_the_model():
    """A learning rate that throws the atoms past float64 ends the fit with
    a ValueError saying so (an IndexError from the eigensolver before), in
    fit and in partial_fit; a failed partial_fit leaves the model as it was."""
    Y, _ = make_moons(400, random_state=0)
    with pytest.raises(ValueError, match="diverged"):
        KDS(8, solver="unrolled", max_epochs=2, learning_rate=1e200, random_state=0).fit(Y)
    model = KDS(8, solver="unrolled", max_epochs=2, random_state=0).fit(Y)
    before = model.components_.copy()
    model.set_params(learning_rate=1e200)
    with pytest.raises(ValueError, match="diverged"):
        model.partial_fit(Y)
    np.testing.assert_array_equal(model.components_, before)
    assert model.n_iter_ == 2


def test_partial_fit_takes_the_parameters_set_since_the_last_call():
    """set_params between partial_fit calls reaches the continuing Adam
    state: the same state stepped at two learning rates moves the atoms
    apart, and by more at the larger one."""
    Y, _ = make_moons(400, random_state=0)
    model = KDS(8, solver="unrolled", max_epochs=2, random_state=0).fit(Y)
    start = model.components_.copy()
    moved = {}
    for rate in (1e-4, 1e-1):
        twin = copy.deepcopy(model).set_params(learning_rate=rate)
        moved[rate] = np.abs(twin.partial_fit(Y).components_ - start).max()
    assert moved[1e-1] > 10 * moved[1e-4]
