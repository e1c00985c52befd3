"""The import directions that ``doc/architecture.rst`` documents hold in the code.

Every module of the package (the optional ``torch`` layer aside, which sits
on top of everything) belongs to one layer; a module may import from its own
layer and the layers below, never from a layer above. The test parses each
module's imports (module-level and inside functions) and fails on the first
import that breaks a documented direction, naming it.
"""

import ast
import pathlib

import pytest

import skrbfkmeans

PACKAGE = pathlib.Path(skrbfkmeans.__file__).parent

# Lowest first. A module is named by its path below the package, without
# ".py"; a subpackage by its folder (every module in it).
LAYERS = {
    "engine": ["_engine", "_entmax"],
    "support": ["_scaling", "_validation", "_version", "_policy"],
    "iterations": [
        "_rows",
        "_iterations",
        "_finish",
        "_lloyd",
        "_hartigan",
        "_polish",
        "_certificate",
        "_schedule",
        "_anneal",
        "_stream",
        "_dask",
        "_loss",
    ],
    "estimators": ["_base", "_rbf_kmeans", "_annealed_rbf_kmeans"],
    "entry points": ["__init__", "__main__", "plotting", "_cli"],
}
RANK = {name: rank for rank, layer in enumerate(LAYERS.values()) for name in layer}


def _unit(module):
    """The layer entry a dotted module path below the package belongs to."""
    head = module.split(".")[0]
    return head


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "torch":
            continue
        yield ".".join(parts), path


def _package_imports(module, path):
    """Yield ``(line, imported module)`` for every import of the package."""
    is_package = path.name == "__init__.py"
    package = module.split(".")[:-1] if not is_package else module.split(".")
    if is_package and module == "__init__":
        package = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.startswith("skrbfkmeans."):
                    yield node.lineno, node.module[len("skrbfkmeans.") :]
                continue
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:
                for alias in node.names:
                    yield node.lineno, ".".join(base + [alias.name])
            else:
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("skrbfkmeans."):
                    yield node.lineno, alias.name[len("skrbfkmeans.") :]


MODULES = list(_modules())


def test_every_module_has_a_layer():
    missing = sorted({_unit(m) for m, _ in MODULES} - set(RANK))
    assert not missing, f"modules without a documented layer: {missing}"


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_point_down(module, path):
    rank = RANK[_unit(module)]
    for line, target in _package_imports(module, path):
        unit = _unit(target)
        if unit == "torch":
            pytest.fail(f"{module}:{line} imports the optional torch layer")
        assert RANK[unit] <= rank, (
            f"{module}:{line} imports {target}: "
            f"{_layer_of(unit)} is above {_layer_of(_unit(module))}"
        )


def _layer_of(unit):
    return next(name for name, layer in LAYERS.items() if unit in layer)


def test_engine_imports_nothing_else_of_the_package():
    # The engine is reusable on its own: it imports only itself.
    for module, path in MODULES:
        if _unit(module) != "_engine":
            continue
        for line, target in _package_imports(module, path):
            assert _unit(target) == "_engine", f"{module}:{line} imports {target}"


def test_the_layers_are_the_documented_ones():
    text = (PACKAGE.parent / "doc" / "architecture.rst").read_text(encoding="utf-8")
    for name, layer in LAYERS.items():
        for unit in layer:
            assert f"``{unit}" in text, f"{unit} ({name}) is not in architecture.rst"


def test_a_broken_direction_is_found(tmp_path):
    # The parser sees relative imports at any depth, and inside functions.
    path = tmp_path / "passes.py"
    path.write_text("def f():\n    from .._base import x\n", encoding="utf-8")
    imports = list(_package_imports("_engine.passes", path))
    assert imports == [(2, "_base")]
    assert RANK[_unit(imports[0][1])] > RANK["_engine"]
