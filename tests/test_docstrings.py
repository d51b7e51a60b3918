"""Every public name has a docstring that reaches ``help()``; the estimators'
docstrings are numpydoc with Parameters (naming every ``__init__``
parameter), Attributes and Examples; and every example in the package's
docstrings runs (``make test`` runs them, as ``pytest --doctest-modules``
would)."""

import doctest
import importlib
import inspect
import pkgutil
import re
import warnings

import pytest
from sklearn.base import BaseEstimator

import fastkds

PUBLIC = [name for name in fastkds.__all__ if not name.startswith("__")]
ESTIMATORS = [
    name
    for name in PUBLIC
    if isinstance(getattr(fastkds, name), type) and issubclass(getattr(fastkds, name), BaseEstimator)
]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_has_a_docstring(name):
    doc = inspect.getdoc(getattr(fastkds, name))
    assert doc and len(doc.split()) >= 5, f"fastkds.{name} has no docstring"


def _sections(doc):
    """numpydoc sections of ``doc``: title -> body (a title is a line over a
    line of dashes as long)."""
    lines = doc.splitlines()
    heads = [
        i
        for i in range(len(lines) - 1)
        if lines[i].strip()
        and re.fullmatch(r"-{3,}", lines[i + 1].strip())
        and len(lines[i + 1].strip()) == len(lines[i].strip())
    ]
    return {lines[i].strip(): "\n".join(lines[i + 2 : j]) for i, j in zip(heads, [*heads[1:], len(lines)])}


def _documented_names(section):
    """Names of the entries of a Parameters or Attributes section ("name : type")."""
    return set(re.findall(r"^(\w+) :", section, flags=re.M))


def test_estimators_are_found():
    assert {"KDS", "KDSClustering", "KDSEnsembleClustering"} <= set(ESTIMATORS)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_docstring_is_numpydoc(name):
    cls = getattr(fastkds, name)
    sections = _sections(inspect.getdoc(cls))
    for title in ("Parameters", "Attributes", "Examples"):
        assert title in sections, f"{name} docstring lacks a {title} section"
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    missing = params - _documented_names(sections["Parameters"])
    assert not missing, f"{name} docstring does not describe {sorted(missing)}"
    assert _documented_names(sections["Attributes"]), f"{name} documents no attribute"
    assert ">>>" in sections["Examples"]


def test_section_parser_finds_a_missing_parameter():
    class Undocumented(BaseEstimator):
        """Something.

        Parameters
        ----------
        a : int
            A.

        Attributes
        ----------
        b_ : int
        """

        def __init__(self, a=1, c=2):
            self.a, self.c = a, c

    sections = _sections(inspect.getdoc(Undocumented))
    assert _documented_names(sections["Parameters"]) == {"a"}
    assert "Examples" not in sections


@pytest.mark.parametrize("name", ESTIMATORS)
def test_public_methods_have_docstrings(name):
    cls = getattr(fastkds, name)
    for method in (
        "fit",
        "transform",
        "predict",
        "fit_transform",
        "fit_predict",
        "partial_fit",
        "inverse_transform",
        "objective",
        "score",
        "get_feature_names_out",
        "save",
    ):
        if hasattr(cls, method):
            assert inspect.getdoc(getattr(cls, method)), f"{name}.{method} has no docstring"


def _public_modules():
    """The package and its public modules, less those of optional dependencies."""
    optional = {"fastkds.gpu"}  # numba-cuda
    names = ["fastkds"] + [
        m.name
        for m in pkgutil.walk_packages(fastkds.__path__, "fastkds.")
        if not any(part.startswith("_") for part in m.name.split("."))
    ]
    return [name for name in names if name not in optional]


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for name in _public_modules():
        module = importlib.import_module(name)
        tests += [t for t in finder.find(module) if t.examples]
    return tests


DOCTESTS = _doctests()


def test_the_estimators_examples_are_collected():
    names = {t.name for t in DOCTESTS}
    assert {
        "fastkds.estimators.kds.KDS",
        "fastkds.estimators.clustering.KDSClustering",
        "fastkds.estimators.ensemble.KDSEnsembleClustering",
    } <= names


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_examples_run(test):
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warnings are not part of an example's output
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
