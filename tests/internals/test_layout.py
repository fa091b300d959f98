"""The layout holds: no import circle in the package (imports inside functions count), the
Dynamo layer's folders import only downward, library folders never import each other,
and no module imports another folder's private names; ``__all__`` lists exactly what a
module defines for others.

The layers of ``_dynamo`` (see its docstring), lowest first; a module may import its own
layer's modules in its own folder, and any lower layer's.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pathlib
from typing import NamedTuple

import pytest

import dynamo_tree_compat
from tests.helpers.source import RunTimeVisitor

PACKAGE = pathlib.Path(dynamo_tree_compat.__file__).resolve().parent
ROOT = "dynamo_tree_compat"
LIBRARIES = ("dmtree", "optree", "pytree")
#: ``_dynamo``'s layers, lowest first: a folder, or a module directly in ``_dynamo``.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"runtime"}),
    frozenset({"seam"}),
    frozenset({"common"}),
    frozenset(LIBRARIES),
    frozenset({"probes", "graph_breaks"}),
    frozenset({"handlers", "builder_hooks"}),
    frozenset({"registration"}),
)


class Import(NamedTuple):
    """One import: the importing module, the module imported, the names taken from it."""

    importer: str
    imported: str
    names: tuple[str, ...]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    _module_name(path): path for path in sorted(PACKAGE.rglob("*.py")) if "tests" not in path.parts
}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


class _Collector(RunTimeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.found: list[Import] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == ROOT:
                self.found.append(Import(self.module, alias.name, ()))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module if _is_package(self.module) else self.module.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.module else base
        else:
            target = node.module or ""
        if target.split(".")[0] != ROOT:
            return
        names = tuple(alias.name for alias in node.names)
        submodules = [name for name in names if f"{target}.{name}" in MODULES]
        for name in submodules:  # `from . import x`: an import of the module x
            self.found.append(Import(self.module, f"{target}.{name}", ()))
        rest = tuple(name for name in names if name not in submodules)
        if rest or not submodules:
            self.found.append(Import(self.module, target, rest))


def imports() -> list[Import]:
    """Every import of the package's modules by the package's modules."""
    found = []
    for module, path in MODULES.items():
        collector = _Collector(module)
        collector.visit(ast.parse(path.read_text()))
        found += collector.found
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for found in imports():
        if found.imported in MODULES and found.imported != found.importer:
            graph[found.importer].add(found.imported)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (its strongly connected components of two or more).

    >>> circles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in sorted(graph.get(node, ())):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    assert circles(_graph()) == []


def _place(module: str) -> tuple[int, str] | None:
    """(layer, folder or module) of a module of ``_dynamo``; None outside it, or for
    ``_dynamo``'s contract."""
    prefix = f"{ROOT}._dynamo."
    if not module.startswith(prefix):
        return None
    unit = module.removeprefix(prefix).split(".")[0]
    for layer, units in enumerate(LAYERS):
        if unit in units:
            return layer, unit
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and the docstring")


def test_every_dynamo_module_has_a_layer() -> None:
    for module in MODULES:
        if module != f"{ROOT}._dynamo":
            _place(module)


def test_the_dynamo_layers_import_downward_and_libraries_not_each_other() -> None:
    wrong = []
    for found in imports():
        importer, imported = _place(found.importer), _place(found.imported)
        if importer is None or imported is None:
            continue
        same_unit = importer[1] == imported[1]
        if imported[0] > importer[0] or (imported[0] == importer[0] and not same_unit):
            wrong.append(f"{found.importer} imports {found.imported}")
    assert wrong == []


def _folder(module: str) -> str:
    return module if _is_package(module) else module.rpartition(".")[0]


def test_no_module_imports_another_folders_private_names() -> None:
    wrong = [
        f"{found.importer} imports {name} from {found.imported}"
        for found in imports()
        for name in found.names
        if name.startswith("_")
        and not name.endswith("__")
        and _folder(found.importer) != _folder(found.imported)
    ]
    assert wrong == []


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


@functools.cache
def _taken() -> dict[str, set[str]]:
    """The public names other modules of the package import from each module."""
    taken: dict[str, set[str]] = {}
    for found in imports():
        if found.imported != found.importer:
            public = {name for name in found.names if not name.startswith("_")}
            taken.setdefault(found.imported, set()).update(public)
    return taken


@pytest.mark.parametrize("module", sorted(MODULES))
def test_all_is_exact(module: str) -> None:
    """``__all__`` names what exists, and every public name that another module takes."""
    tree = ast.parse(MODULES[module].read_text())
    loaded = importlib.import_module(module)
    listed = getattr(loaded, "__all__", None)
    public = {name for name in _defined(tree) if not name.startswith("_")}
    if listed is None:
        assert module.endswith("__main__") or not public, f"{module} has no __all__"
        return
    assert len(listed) == len(set(listed)), "a name listed twice"
    assert [name for name in listed if not hasattr(loaded, name)] == []
    taken = _taken().get(module, set()) - {"*"}
    submodules = {name for name in taken if f"{module}.{name}" in MODULES}
    assert sorted(taken - submodules - set(listed)) == [], f"{module}: taken, not listed"


#: The modules outside ``_dynamo`` that reach past its contract, and into what: the
#: light modules autoload loads, and the graph-break records.
PAST_THE_CONTRACT = {
    f"{ROOT}.activation": {f"{ROOT}._dynamo.runtime", f"{ROOT}._dynamo.seam.lock"},
    f"{ROOT}.explain": {f"{ROOT}._dynamo.graph_breaks"},
    f"{ROOT}.hints": {f"{ROOT}._dynamo.graph_breaks"},
    f"{ROOT}.originals": {f"{ROOT}._dynamo.runtime"},
    f"{ROOT}.recording": {f"{ROOT}._dynamo.graph_breaks"},
    f"{ROOT}.pytest_plugin": {f"{ROOT}._dynamo.graph_breaks"},
}


def test_outside_dynamo_only_the_contract_is_used() -> None:
    past: dict[str, set[str]] = {}
    for found in imports():
        inside = found.importer.startswith(f"{ROOT}._dynamo")
        if not inside and found.imported.startswith(f"{ROOT}._dynamo."):
            past.setdefault(found.importer, set()).add(found.imported)
    assert past == PAST_THE_CONTRACT


def test_the_contract_exports_each_name_as_its_module_defines_it() -> None:
    """``_dynamo.X`` is the ``X`` its module defines, under that very name: no aliases."""
    from dynamo_tree_compat import _dynamo

    assert sorted(_dynamo.__all__) == sorted(_dynamo._CONTRACT)
    for name, module in _dynamo._CONTRACT.items():
        defined = importlib.import_module(f"{ROOT}._dynamo.{module}")
        assert name in vars(defined), f"{module} defines no {name}"
        assert getattr(_dynamo, name) is vars(defined)[name]


TWINS = f"{ROOT}.twins"
#: Who may import the twins: the table, the installer that registers its rows, the
#: public name of dm-tree's (``dynamo_tree_compat.dmtree``), and dm-tree's fast path,
#: which reads nodes by the twin's own rules.
USES_THE_TWINS = {f"{ROOT}.substitutions", f"{ROOT}.installer", f"{ROOT}.dmtree"}
USES_THE_TWINS |= {f"{ROOT}._dynamo.dmtree.fast"}


def test_the_twins_import_nothing_of_the_package_and_only_the_table_imports_them() -> None:
    """The twins are plain Python in a folder of their own: they import nothing of the
    package (but each other's own modules), and only USES_THE_TWINS imports them."""
    inside = [
        f"{found.importer} imports {found.imported}"
        for found in imports()
        if found.importer.startswith(TWINS)
        and found.imported.startswith(ROOT)
        and not found.imported.startswith(TWINS)
    ]
    users = {
        found.importer
        for found in imports()
        if found.imported.startswith(TWINS) and not found.importer.startswith(TWINS)
    }
    assert inside == []
    assert users <= USES_THE_TWINS, sorted(users - USES_THE_TWINS)
    assert {name for name in MODULES if name.startswith(f"{TWINS}.")} >= {
        f"{TWINS}.dmtree",
        f"{TWINS}.keras",
        f"{TWINS}.optree",
    }


def test_the_public_dmtree_is_the_twins_api_not_a_second_copy() -> None:
    """``dynamo_tree_compat.dmtree`` hands out the twins' own objects, and is no package:
    were it one (a ``__path__`` passed on), its submodules would be the twins' imported
    again, a second ``ObjectProxy`` class and a second warning flag among them."""
    import sys

    from dynamo_tree_compat import _dynamo, dmtree
    from dynamo_tree_compat.twins import dmtree as twins

    for name in _dynamo.__all__:  # every module of the Dynamo layer, dm-tree's fast path too
        getattr(_dynamo, name)
    assert dmtree.flatten is twins.flatten and dmtree._nodes is twins._nodes
    assert not hasattr(dmtree, "__path__")
    assert [name for name in sys.modules if name.startswith(f"{ROOT}.dmtree.")] == []


#: Activation's and registration's state: each module's one object, and the tables.
STATE_HOLDERS = {
    "dynamo_tree_compat.activation": {"STATE"},
    "dynamo_tree_compat.installer": {"PROGRESS", "REGISTERED", "UNGUARDED", "NOT_REGISTERED"},
}


def mutable_globals(source: str) -> list[str]:
    """The module-level names ``source`` rebinds from a function (``global``) or binds to
    a list, set or dict display, and the names of the functions that rebind them.

    >>> mutable_globals("flags = [False]\\ndef f():\\n    global on\\n    on = True")
    ['flags', 'on (f)']
    """
    tree = ast.parse(source)
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        value = getattr(node, "value", None)
        if isinstance(value, (ast.List, ast.Set, ast.Dict, ast.ListComp, ast.DictComp)):
            found += [t.id for t in targets if isinstance(t, ast.Name) and t.id != "__all__"]
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Global):
                    found += [f"{name} ({function.name})" for name in node.names]
    return found


@pytest.mark.parametrize("module", sorted(STATE_HOLDERS))
def test_activation_and_registration_keep_their_state_in_one_object(module: str) -> None:
    """No flag of their own beside it: a module-level list, set or dict is the state
    object's or a table, and no function rebinds a module-level name."""
    found = set(mutable_globals(MODULES[module].read_text()))
    assert found <= STATE_HOLDERS[module], sorted(found - STATE_HOLDERS[module])
