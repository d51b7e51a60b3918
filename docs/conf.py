"""Sphinx configuration of the fastkds documentation.

Build: ``sphinx-build -W -b html docs docs/_build/html`` (needs ``.[docs]``).
Markdown pages are read by myst-parser; the API reference comes from the
numpydoc docstrings through autodoc.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "fastkds"
author = "the fastkds authors"
copyright = "2026, the fastkds authors"

try:
    from fastkds import __version__ as release
except ImportError:  # the package is not importable: the API page will say so
    release = "0.1.0"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# numpydoc: no member tables (autodoc lists the members), no validation noise.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_member_order = "bysource"
autodoc_default_options = {}

html_theme = "alabaster"
html_title = f"fastkds {release}"
html_static_path = []
