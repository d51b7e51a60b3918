"""
Choosing ``lam`` with a Pipeline and GridSearchCV
=================================================

``lam`` weighs locality against reconstruction: small values let a
point use far atoms, large ones tie it to the nearest. No score of the
dictionary alone can choose it (the guide says why), so score the task:
here the clustering of labelled moons, by the adjusted Rand index of
:meth:`~fastkds.KDSClustering.predict` on held-out folds.

The estimators are ordinary scikit-learn estimators, so a
:class:`~sklearn.pipeline.Pipeline` (centring first) and
:class:`~sklearn.model_selection.GridSearchCV` work as for any other;
the parameter is addressed as ``kds__lam``.
"""

import matplotlib.pyplot as plt
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from fastkds import KDSClustering, make_moons
from fastkds.plotting import plot_atoms_2d

Y, y = make_moons(1000, random_state=0)
# A loose tolerance (tol=1e-2) keeps the 13 fits of this page quick.
pipe = Pipeline(
    [
        ("centre", StandardScaler(with_std=False)),
        ("kds", KDSClustering(2, n_atoms=16, n_iter=30, tol=1e-2, random_state=0)),
    ]
)
lams = [0.02, 0.2, 2.0, 20.0]
folds = StratifiedKFold(3, shuffle=True, random_state=0)
search = GridSearchCV(pipe, {"kds__lam": lams}, cv=folds, scoring="adjusted_rand_score")
search.fit(Y, y)
print("best:", search.best_params_, f"adjusted Rand index {search.best_score_:.3f}")

# %%
# Too small a ``lam`` and the codes reach across the gap between the
# moons; too large and each point keeps to its nearest atom, so the
# graph falls apart into pieces. On the left the score of each ``lam``
# (mean and spread over the three folds); on the right the refitted best
# pipeline's atoms. They live in the centred coordinates of the
# pipeline's first step, so the points are centred the same way.
results = search.cv_results_
best = search.best_estimator_
best_lam = search.best_params_["kds__lam"]
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
left.errorbar(lams, results["mean_test_score"], yerr=results["std_test_score"], marker="o", capsize=3)
left.set_xscale("log")
left.set_xlabel("lam")
left.set_ylabel("adjusted Rand index (held-out)")
left.set_title("GridSearchCV over kds__lam", fontsize=10)
plot_atoms_2d(
    best["centre"].transform(Y),
    best.predict(Y),
    best["kds"].components_,
    ax=right,
    title=f"best pipeline, lam={best_lam:g}",
)
plt.show()
