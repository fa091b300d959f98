"""The table and its installer: each twin matches its original's signature, registers once,
replaces nothing."""

from __future__ import annotations

import inspect
import sys

import pytest
import torch

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo, installer, substitutions
from dynamo_tree_compat._dynamo.seam import internals
from dynamo_tree_compat.outcomes import Kind
from tests.helpers.fresh import run_fresh

tree = pytest.importorskip("tree")
optree = pytest.importorskip("optree")


@pytest.mark.parametrize("substitution", substitutions.DM_TREE, ids=lambda s: s.original_name)
def test_twin_has_the_original_signature(substitution: substitutions.Substitution) -> None:
    original = substitution.original()
    assert original is not None
    assert inspect.signature(substitution.twin).parameters.keys() == (
        inspect.signature(original).parameters.keys()
    )
    for name, parameter in inspect.signature(original).parameters.items():
        twin_parameter = inspect.signature(substitution.twin).parameters[name]
        assert (twin_parameter.kind, twin_parameter.default) == (parameter.kind, parameter.default)


def test_every_substitution_is_registered_here() -> None:
    torch._dynamo.reset()
    dynamo_tree_compat.install()
    every = tuple(  # the libraries imported here (Keras's tree layers may not be)
        row
        for library in substitutions.LIBRARIES.values()
        if library.module in sys.modules
        for row in library.rows
    )
    present = {s.original_name for s in every if s.original() is not None and installer.needed(s)}
    assert set(installer.REGISTERED) == present
    assert set(installer.NOT_REGISTERED) == {s.original_name for s in every} - present
    assert {o.kind for o in installer.NOT_REGISTERED.values()} <= {
        Kind.LIBRARY_LACKS_IT,
        Kind.NO_TWIN_NEEDED,
    }
    states = dynamo_tree_compat.status().functions
    assert {states[name] for name in present} == {"registered"}


def test_install_is_idempotent() -> None:
    dynamo_tree_compat.install()
    before = dict(installer.REGISTERED)
    assert before
    assert installer.install() == {}
    dynamo_tree_compat.install()
    assert installer.REGISTERED == before


def test_originals_are_untouched_in_a_fresh_process() -> None:
    completed = run_fresh(
        """
        import tree
        before = dict(vars(tree))
        codes = {name: value.__code__ for name, value in before.items() if callable(value)
                 and hasattr(value, "__code__")}
        import dynamo_tree_compat, torch
        compiled = torch.compile(lambda x: tree.flatten([x, (x,)]), fullgraph=True, backend="eager")
        compiled(torch.ones(1))
        after = dict(vars(tree))
        assert after.keys() == before.keys()
        assert all(after[name] is value for name, value in before.items()), "an attribute changed"
        assert all(after[name].__code__ is code for name, code in codes.items())
        print("untouched")
        """
    )
    assert completed.stdout.strip() == "untouched"


def test_registers_at_dynamos_first_frame_whichever_loads_last() -> None:
    """Importing Dynamo and dm-tree, in either order, registers nothing (a process that
    never compiles pays nothing); Dynamo's first frame registers, before it traces."""
    for order in ("import torch._dynamo; import tree", "import tree; import torch._dynamo"):
        completed = run_fresh(
            f"""
            import sys
            import dynamo_tree_compat
            {order}
            import torch
            assert "dynamo_tree_compat.installer" not in sys.modules
            fn = torch.compile(lambda x: tree.map_structure(abs, {{"a": x}}), fullgraph=True,
                               backend="eager")
            print(fn(-torch.ones(1))["a"].item())
            from dynamo_tree_compat import installer
            assert "tree.flatten" in installer.REGISTERED
            """
        )
        assert completed.stdout.strip() == "1.0", completed.stderr


def test_without_dm_tree_installation_status_says_so_and_optree_still_registers() -> None:
    completed = run_fresh(
        """
        import importlib.machinery, warnings
        finder = importlib.machinery.PathFinder
        real_find_spec = finder.find_spec.__func__
        def find_spec(cls, name, path=None, target=None):  # as if dm-tree were not installed
            return None if name == "tree" else real_find_spec(cls, name, path, target)
        finder.find_spec = classmethod(find_spec)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import dynamo_tree_compat, torch._dynamo
            import torch
            torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
        from dynamo_tree_compat import installer
        # optree's rows, and torch's own pytree (registered beside a mirrored library)
        assert {name.split(".")[0] for name in installer.REGISTERED} == {"optree", "torch"}
        print(dynamo_tree_compat.status().functions["tree.flatten"])
        print([str(w.message) for w in caught if w.category.__name__ ==
               "DynamoTreeCompatWarning"])
        """
    )
    assert completed.stdout.strip().splitlines() == [
        "unavailable: dm-tree is not installed",
        "[]",  # optree is installed: there is something to make traceable
    ]


def test_status_imports_no_library_and_names_a_layer_its_keras_lacks() -> None:
    """``status()`` looks for Keras's tree layers without importing Keras (its parents'
    import would run Keras's own); a layer this Keras lacks is named as such."""
    completed = run_fresh(
        """
        import importlib.util, sys, types
        import dynamo_tree_compat
        keras = types.ModuleType("keras")  # a Keras with a tree package and no layers in it
        keras.__path__ = []
        keras.__spec__ = importlib.util.spec_from_loader("keras", loader=None, is_package=True)
        sys.modules["keras"] = keras
        functions = dynamo_tree_compat.status().functions
        print(functions["keras.src.tree.torchtree_impl.traverse"])
        del sys.modules["keras"]
        dynamo_tree_compat.status()  # the installed Keras, if any, is looked for, not imported
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("keras", "tree")))
        """
    )
    assert completed.stdout.strip().splitlines() == [
        "unavailable: this keras has no keras.src.tree.torchtree_impl",
        "[]",
    ]


def _warnings_in_a_fresh_process(torch_change: str, after: str, any_torch: str = "1") -> list[str]:
    """Changes torch as ``torch_change`` says, imports the package, dm-tree, Dynamo and
    optree, checks nothing registered, prints the package's warnings, then runs ``after``.
    ``any_torch`` sets the switch that activates on any torch release (the torch matrix
    sets it; only the out-of-range test turns it off).
    """
    code = f"""
import warnings, torch, torch.compiler
{torch_change}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import dynamo_tree_compat, tree, torch._dynamo
    import tree as again, optree
from dynamo_tree_compat import installer
assert installer.REGISTERED == {{}}
messages = [str(w.message) for w in caught if w.category.__name__ ==
            "DynamoTreeCompatWarning"]
print(len(messages), messages[0])
{after}
"""
    return run_fresh(code, DYNAMO_TREE_COMPAT_ANY_TORCH=any_torch).stdout.strip().splitlines()


def test_a_strict_export_as_dynamos_first_use_registers_first() -> None:
    """``torch.export``'s graph capture skips Dynamo's frame check (torch 2.10 on): the
    registration that waits for the first frame comes before the capture all the same."""
    completed = run_fresh(
        """
        import torch, tree

        class Model(torch.nn.Module):
            def forward(self, x):
                return tree.map_structure(lambda t: t * 2, {"b": x, "a": [x + 1]})

        exported = torch.export.export(Model(), (torch.ones(2),), strict=True)
        print(repr(exported.module()(torch.ones(2))) == repr(Model()(torch.ones(2))))
        """
    )
    assert completed.stdout.strip() == "True", completed.stderr


def test_any_torch_switch_activates_outside_the_supported_releases() -> None:
    code = """
import torch
torch.__version__ = "2.16.0"
import dynamo_tree_compat, tree, torch._dynamo
x = torch.ones(1)
print(torch.compile(lambda x: tree.flatten([x * 2]), backend="eager", fullgraph=True)(x))
from dynamo_tree_compat import installer
print("tree.flatten" in installer.REGISTERED)
"""
    lines = run_fresh(code, DYNAMO_TREE_COMPAT_ANY_TORCH="1").stdout.strip().splitlines()
    assert lines == ["[tensor([2.])]", "True"]


def test_torch_without_substitute_in_graph_warns_once_and_does_nothing() -> None:
    first, second = _warnings_in_a_fresh_process(
        "del torch.compiler.substitute_in_graph",
        'print(dynamo_tree_compat.status().functions["tree.flatten"])',
    )
    assert first == "1 dynamo-tree-compat is doing nothing: " + _dynamo.SUBSTITUTE_UNAVAILABLE
    assert second == _dynamo.SUBSTITUTE_UNAVAILABLE


def test_torch_outside_the_tested_releases_warns_once_and_does_nothing() -> None:
    first, second = _warnings_in_a_fresh_process(
        'torch.__version__ = "2.16.0"',
        """
x = torch.ones(1)
try:
    torch.compile(lambda x: tree.flatten([x * 2]), backend="eager", fullgraph=True)(x)
    print("traced")
except torch._dynamo.exc.Unsupported:
    print("graph break, as without the package")
""",
        any_torch="0",
    )
    (low_major, low_minor), (high_major, high_minor) = installer.TORCH_RANGE
    assert first == (
        "1 dynamo-tree-compat is doing nothing: torch 2.16.0 is outside the releases this "
        f"package supports ({low_major}.{low_minor} to {high_major}.{high_minor})"
    )
    assert second == "graph break, as without the package"


def _moved() -> None:
    raise internals.Missing("moved, for the test")


def test_uninstall_falls_back_when_dynamo_tables_have_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(internals, "registration_tables", _moved)
    assert set(installer.uninstall()) == set(installer.REGISTERED) != set()
    assert "tree.flatten" in installer.REGISTERED  # left in place, still working
    monkeypatch.undo()
    torch._dynamo.reset()
    x = torch.ones(1)
    spec = torch.compile(optree.tree_structure, backend="eager", fullgraph=True)([x])
    assert type(spec) is optree.PyTreeSpec  # what stayed registered stayed whole


def test_mode_guard_falls_back_when_dynamo_tables_have_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(internals, "registration_tables", _moved)
    assert not _dynamo.route(tree.flatten, "tree.flatten", installer.MODE_FLAG)


def test_every_registration_guards_on_the_mode() -> None:
    assert installer.UNGUARDED == set()


def test_an_outcome_for_a_library_not_imported_does_not_outlive_its_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A try on a torch that cannot substitute records an outcome for every row, those
    of libraries not imported too; once it can, those rows are pending again, not stuck
    with the old reason."""
    absent = substitutions.Substitution("dm-tree", "no_such_tree_module", "flatten", None)
    library = substitutions.Library("no_such_tree_module", lambda m: True, (absent,))
    monkeypatch.setitem(substitutions.LIBRARIES, "absent", library)
    monkeypatch.setattr(_dynamo, "substitution_support", lambda: "no substitute_in_graph")
    installer.install()
    assert installer.NOT_REGISTERED[absent.original_name].kind is Kind.SUBSTITUTION_UNAVAILABLE
    monkeypatch.undo()
    monkeypatch.setitem(substitutions.LIBRARIES, "absent", library)
    installer.install()
    assert absent.original_name not in installer.NOT_REGISTERED
    monkeypatch.undo()
