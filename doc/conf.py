"""Sphinx configuration of the skrbfkmeans documentation.

Build with ``python -m sphinx -W -b html doc doc/_build/html`` (the ``doc``
extra installs what it needs). The build runs every ``examples/plot_*.py``
and needs no network access.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import skrbfkmeans

HERE = Path(__file__).resolve().parent

# -- Project ------------------------------------------------------------------

project = "skrbfkmeans"
copyright = "The skrbfkmeans developers"
release = skrbfkmeans.__version__
version = ".".join(release.split(".")[:2])

# -- General ------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
templates_path = ["_templates"]
exclude_patterns = ["_build"]
root_doc = "index"
default_role = "literal"
# Cross-references to other projects' objects (sklearn.cluster.KMeans in a
# See Also section) render as plain names: intersphinx would fetch inventories
# over the network, and the build must work offline.
nitpicky = False

# -- autodoc / autosummary ----------------------------------------------------

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": True}
autodoc_typehints = "none"

# -- numpydoc -----------------------------------------------------------------

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# Validation of every docstring the API reference renders: "all" checks, minus
# the exclusions below, each for a reason.
numpydoc_validation_checks = {
    "all",
    # GL01 "Docstring text (summary) should start in the line immediately
    # after the opening quotes": the package starts the summary on the line of
    # the quotes (PEP 257, scikit-learn), which numpydoc 1.8 reports (later
    # versions accept it).
    "GL01",
    # ES01 "No extended summary found": one-line methods (predict, transform)
    # say all they need in their summary, as in scikit-learn.
    "ES01",
    # SA01 "See Also section not found": methods have no See Also section
    # (scikit-learn's convention); every public class and function has one.
    "SA01",
    # EX01 "No examples section found": the classes and functions have
    # doctested examples; their methods are shown in those examples.
    "EX01",
    # RT02 "The first line of the Returns section should contain only the
    # type, unless multiple values are being returned": scikit-learn's (and
    # this package's) convention names every returned value
    # ("labels : ndarray of shape (n_samples,)").
    "RT02",
}
# Methods inherited from scikit-learn (BaseEstimator, TransformerMixin, the
# metadata-routing and set_output machinery) are rendered with the classes but
# their docstrings belong to scikit-learn, not to this package.
numpydoc_validation_exclude = {
    r"\.get_params$",
    r"\.set_params$",
    r"\.set_output$",
    r"\.get_metadata_routing$",
    r"\.set_\w+_request$",
    r"\.get_feature_names_out$",
}


_SKLEARN_ROLE = re.compile(r":(?:ref|term):`([^`<]*?)\s*(?:<[^`>]*>)?`")


def _unlink_sklearn_roles(app, what, name, obj, options, lines):
    """Render scikit-learn's cross-references as plain text.

    Methods inherited from scikit-learn (``set_output``, the metadata-routing
    methods) keep their docstrings, which link to labels and glossary terms
    of scikit-learn's own documentation; outside it those links do not exist.
    """
    if not (getattr(obj, "__module__", None) or "").startswith("sklearn."):
        return
    for i, line in enumerate(lines):
        lines[i] = _SKLEARN_ROLE.sub(lambda m: m.group(1) or "", line)


def setup(app):
    """Connect the docstring hooks above."""
    # Before numpydoc (priority 500) parses the docstrings.
    app.connect("autodoc-process-docstring", _unlink_sklearn_roles, priority=400)


# -- HTML ---------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"skrbfkmeans {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_prev_next": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": []}
html_static_path = []
html_show_sourcelink = False

# -- sphinx-gallery -----------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": ["../examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "doc_module": ("skrbfkmeans",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skrbfkmeans": None},
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    # A failing example fails the build.
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "min_reported_time": 1,
}

# -- The command line's help, generated so that it never goes stale -----------


def _write_cli_help():
    """Write ``generated/cli.inc``: the output of ``--help`` of each command."""
    out = HERE / "generated" / "cli.inc"
    out.parent.mkdir(exist_ok=True)
    env = {**os.environ, "COLUMNS": "80"}
    blocks = []
    for args in ([], ["demo"], ["cluster"], ["reproduce"]):
        command = " ".join(["python -m skrbfkmeans", *args, "--help"])
        text = subprocess.run(
            [sys.executable, "-m", "skrbfkmeans", *args, "--help"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
        body = "\n".join("    " + line if line else "" for line in text.splitlines())
        blocks.append(f".. code-block:: text\n\n    $ {command}\n{body}\n")
    out.write_text("\n".join(blocks), encoding="utf-8")


_write_cli_help()


def _write_readme_section(title, name):
    """Write ``generated/NAME``: the body of the README's section ``title``.

    The documentation shows some of the README's sections verbatim (the
    set-up commands, the which-tool table); copying them at build time keeps
    the two from drifting apart.
    """
    readme = (HERE.parent / "README.rst").read_text(encoding="utf-8")
    heading = f"\n{title}\n{'-' * len(title)}\n"
    start = readme.index(heading) + len(heading)
    # The section ends where the next title (a line followed by dashes) starts.
    lines = readme[start:].splitlines()
    body = []
    for line, below in zip(lines, lines[1:] + [""]):
        if below and set(below) == {"-"} and len(below) >= len(line) > 0:
            break
        body.append(line)
    out = HERE / "generated" / name
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(body).strip() + "\n", encoding="utf-8")


_write_readme_section("Set up", "readme_setup.inc")
_write_readme_section("Which tool when", "readme_which_tool.inc")
