"""The import directions that ``doc/architecture.rst`` documents hold in the code.

The page lists the package's parts top to bottom, and within each part its
modules top to bottom, in one literal block; a second block lists the
arrows between parts that must never exist. This test reads both from the
page (they have no other copy), parses every import of every module of the
package (module-level and inside functions) and fails on the first one
that points up, across parts or within a part, or that is a forbidden
arrow, naming it.
"""

import ast
import pathlib
import re

import pytest

import skrbfkmeans

PACKAGE = pathlib.Path(skrbfkmeans.__file__).parent
PAGE = PACKAGE.parent / "doc" / "architecture.rst"


def _literal_block(text, intro):
    """Return the lines of the literal block that follows the line ``intro``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(intro))
    assert lines[start].endswith("::"), f"{intro!r} does not open a literal block"
    block = []
    for line in lines[start + 2 :]:
        if line and not line.startswith("    "):
            break
        if line.strip():
            block.append(line.strip())
    return block


def _read_page():
    text = PAGE.read_text(encoding="utf-8")
    parts = {}
    for line in _literal_block(text, "Parts, top to bottom"):
        name, modules = re.fullmatch(r"([\w ]+):\s+(.+)", line).groups()
        parts[name] = modules.split()
    never = []
    for line in _literal_block(text, "Arrows that must never exist"):
        source, target = re.fullmatch(r"(\w+) -> (\w+)", line).groups()
        never.append((source, target))
    return parts, never


PARTS, NEVER = _read_page()
# (rank of the part, rank within the part) of every documented name: an
# import must go to a larger pair.
RANK = {
    name: (part_rank, rank)
    for part_rank, names in enumerate(PARTS.values())
    for rank, name in enumerate(names)
}
PART = {name: part for part, names in PARTS.items() for name in names}


def _entry(module):
    """The documented name a dotted module path below the package falls under.

    The longest documented prefix: ``_engine.passes`` for itself,
    ``_cli.main`` for ``_cli``, ``_engine`` (the subpackage's
    ``__init__``) for ``_engine``.
    """
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in RANK:
            return name
    return None


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]  # a subpackage's own module
        yield ".".join(parts), path


def _package_imports(module, path):
    """Yield ``(line, imported module)`` for every import of the package."""
    is_package = path.name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]
    if module == "__init__":
        package = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.startswith("skrbfkmeans."):
                    yield node.lineno, node.module[len("skrbfkmeans.") :]
                continue
            base = package[: len(package) - (node.level - 1)]
            if node.module is None:
                for alias in node.names:
                    yield node.lineno, ".".join(base + [alias.name])
            else:
                yield node.lineno, ".".join(base + [node.module])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("skrbfkmeans."):
                    yield node.lineno, alias.name[len("skrbfkmeans.") :]


MODULES = list(_modules())


def test_the_page_lists_each_part_and_module_once():
    # Check that the page's blocks were read: eight parts, no name twice,
    # forbidden arrows between parts it names.
    names = [name for names in PARTS.values() for name in names]
    assert len(PARTS) == 8, PARTS
    assert len(names) == len(set(names)), names
    assert NEVER
    for source, target in NEVER:
        assert source in PARTS and target in PARTS, (source, target)


def test_every_module_is_on_the_page():
    missing = sorted(m for m, _ in MODULES if _entry(m) is None)
    assert not missing, f"modules not on doc/architecture.rst: {missing}"
    listed = {name for names in PARTS.values() for name in names}
    found = {_entry(m) for m, _ in MODULES}
    assert listed <= found, f"names on the page without a module: {listed - found}"


def _violation(module, target):
    """Why an import of ``target`` by ``module`` breaks the page, or None.

    Within a part, only a module listed after ``module``; across parts,
    only a part below, and never along a forbidden arrow. A subpackage
    listed as one name (``_cli``, ``torch``) may import its own modules.
    """
    source, entry = _entry(module), _entry(target)
    if entry is None:
        return f"{target} is not on the page"
    if entry == source:
        return None
    if RANK[entry] < RANK[source]:
        return f"{entry} ({PART[entry]}) is above {source} ({PART[source]})"
    if (PART[source], PART[entry]) in NEVER:
        return f"{PART[source]} -> {PART[entry]} must never exist"
    return None


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_point_down(module, path):
    for line, target in _package_imports(module, path):
        why = _violation(module, target)
        assert why is None, f"{module}:{line} imports {target}: {why}"


@pytest.mark.parametrize(
    "module,target,allowed",
    [
        ("_anneal", "_lloyd", True),  # down within a part
        ("_lloyd", "_anneal", False),  # up within a part
        ("_rows", "_dask", False),  # up within a part
        ("_dask", "_rows", True),
        ("_base", "_rows", True),  # down across parts
        ("_rows", "_base", False),  # up across parts
        ("_base", "_engine.passes", False),  # down, but a forbidden arrow
        ("_engine.blocks", "_engine.passes", False),  # within the engine
        ("_cli.main", "_cli.parser", True),  # inside a subpackage named once
    ],
)
def test_the_rule_itself(module, target, allowed):
    # Check that the rule read from the page decides as documented.
    assert (_violation(module, target) is None) == allowed
