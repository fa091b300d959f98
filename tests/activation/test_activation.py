"""Activation: import, torch's autoload, DYNAMO_TREE_COMPAT=0, scopes, install/uninstall, status."""

from __future__ import annotations

import threading
from importlib import metadata
from typing import Any

import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters

import dynamo_tree_compat
from dynamo_tree_compat import config
from tests.helpers.fresh import run_fresh
from tests.helpers.structures import assert_identical

tree = pytest.importorskip("tree")

COMPILE_DM_TREE = """
import torch, tree
fn = torch.compile(lambda x: tree.map_structure(abs, {"a": x, "b": [x]}), fullgraph=True,
                   backend="eager")
try:
    fn(-torch.ones(1))
    print("traced")
except torch._dynamo.exc.Unsupported:
    print("graph break")
"""


def test_import_is_cheap_and_loads_no_heavy_module() -> None:
    completed = run_fresh(
        """
        import sys
        import dynamo_tree_compat
        heavy = ("torch", "torch._dynamo", "tree", "optree", "wrapt")
        heavy = [m for m in heavy if m in sys.modules]
        print(heavy, dynamo_tree_compat.activation.activated_by)
        """
    )
    assert completed.stdout.strip() == "[] import"


def test_entry_point_is_installed_in_torch_backends_group() -> None:
    names = {entry.name: entry.value for entry in metadata.entry_points(group="torch.backends")}
    assert names.get("dynamo_tree_compat") == "dynamo_tree_compat.autoload:load"


def test_autoload_activates_without_importing_the_package() -> None:
    completed = run_fresh(
        COMPILE_DM_TREE
        + """
import sys
print(sys.modules["dynamo_tree_compat"].status().activated_by)
"""
    )
    assert completed.stdout.split() == ["traced", "autoload"]


def test_autoload_loads_nothing_heavy_into_import_torch() -> None:
    completed = run_fresh(
        """
        import sys, torch
        print([m for m in ("torch._dynamo", "tree", "optree", "dynamo_tree_compat.installer",
                           "dynamo_tree_compat.substitutions", "dynamo_tree_compat.dmtree")
               if m in sys.modules])
        print("dynamo_tree_compat.activation" in sys.modules)
        """
    )
    assert completed.stdout.split("\n")[:2] == ["[]", "True"]


@pytest.mark.parametrize(
    "switch", [{"DYNAMO_TREE_COMPAT": "0"}, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}]
)
def test_switches_turn_global_activation_off(switch: dict[str, str]) -> None:
    completed = run_fresh(COMPILE_DM_TREE, **switch)
    assert completed.stdout.strip() == "graph break"


def test_switched_off_import_still_allows_a_scope() -> None:
    completed = run_fresh(
        """
        import torch, tree, dynamo_tree_compat
        assert dynamo_tree_compat.status().mode == "off"
        assert dynamo_tree_compat.status().switched_off
        fn = lambda x: tree.flatten({"a": x})
        with dynamo_tree_compat.enabled():
            print(torch.compile(fn, fullgraph=True, backend="eager")(torch.ones(1)))
        """,
        DYNAMO_TREE_COMPAT="0",
    )
    assert completed.stdout.strip() == "[tensor([1.])]"


@pytest.mark.parametrize("broken", ["activation.arm", "installer.install"])
def test_failures_in_the_hook_never_break_import_torch(broken: str) -> None:
    module, function = broken.split(".")
    completed = run_fresh(
        f"""
        import warnings
        warnings.simplefilter("always")
        from dynamo_tree_compat import {module}
        def broken(*args, **kwargs):
            raise RuntimeError("simulated failure")
        {module}.{function} = broken
        with warnings.catch_warnings(record=True) as caught:
            import torch, tree, torch._dynamo
            torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
        ours = [str(w.message) for w in caught if w.category.__name__ == "DynamoTreeCompatWarning"]
        print(len(ours))
        print(ours[0])
        """
    )
    count, message = completed.stdout.strip().splitlines()
    assert count == "1"
    assert message.startswith("dynamo-tree-compat is doing nothing: ")
    assert "simulated failure" in message


# --- Scopes ----------------------------------------------------------------------------


@pytest.fixture
def step() -> Any:
    def step(x: torch.Tensor) -> Any:
        return tree.map_structure(lambda t: t * 2, {"a": x, "b": (x,)})

    torch._dynamo.reset()
    counters.clear()
    return step


def _graph_breaks() -> int:
    return sum(counters["graph_break"].values())


def test_scopes_recompile_once_per_mode_change(step: Any) -> None:
    compile_counter = CompileCounter()
    compiled = torch.compile(step, backend=compile_counter)
    x = torch.ones(2)
    expected = step(x)
    seen = []
    with dynamo_tree_compat.disabled():
        assert_identical(compiled(x), expected)
        seen.append((compile_counter.frame_count, _graph_breaks()))
        with dynamo_tree_compat.enabled():
            assert_identical(compiled(x), expected)
            seen.append((compile_counter.frame_count, _graph_breaks()))
        assert_identical(compiled(x), expected)  # the first graph again: its guards hold
        seen.append((compile_counter.frame_count, _graph_breaks()))
    assert_identical(compiled(x), expected)
    seen.append((compile_counter.frame_count, _graph_breaks()))
    off_frames, off_breaks = seen[0]
    assert off_breaks == 1
    assert seen[1] == (off_frames + 1, off_breaks)  # traced whole: one more graph, no break
    assert seen[2] == seen[1] == seen[3]  # no recompiles when modes repeat


def test_function_compiled_inside_a_scope_recompiles_outside(step: Any) -> None:
    compile_counter = CompileCounter()
    compiled = torch.compile(step, backend=compile_counter)
    x = torch.ones(2)
    with dynamo_tree_compat.disabled():
        compiled(x)
    frames = compile_counter.frame_count
    compiled(x)
    assert compile_counter.frame_count == frames + 1
    assert _graph_breaks() == 1


def test_scopes_nest_and_restore_on_exception() -> None:
    assert dynamo_tree_compat.status().mode == "on"
    with dynamo_tree_compat.disabled():
        assert config.twins_enabled is False
        with pytest.raises(KeyError), dynamo_tree_compat.enabled():
            assert config.twins_enabled is True
            raise KeyError("inside")
        assert config.twins_enabled is False
    assert config.twins_enabled is True


def test_scopes_work_as_decorators(step: Any) -> None:
    @dynamo_tree_compat.disabled()
    def run_disabled() -> bool:
        return config.twins_enabled

    assert (run_disabled(), run_disabled(), config.twins_enabled) == (False, False, True)


def test_scopes_are_process_wide_and_threads_restore_their_own() -> None:
    entered = threading.Event()
    leave = threading.Event()
    seen_from_main = []

    def worker() -> None:
        with dynamo_tree_compat.disabled():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait(10)
    seen_from_main.append(config.twins_enabled)
    leave.set()
    thread.join(10)
    assert seen_from_main == [False]  # a scope applies to every thread
    assert config.twins_enabled is True


def test_many_threads_entering_and_leaving_leave_the_mode_as_it_was() -> None:
    def churn(on: bool) -> None:
        for _ in range(200):
            with dynamo_tree_compat.enabled() if on else dynamo_tree_compat.disabled():
                pass

    threads = [threading.Thread(target=churn, args=(i % 2 == 0,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert config.twins_enabled is True


# --- Explicit control ------------------------------------------------------------------


def test_uninstall_then_install_in_a_fresh_process() -> None:
    completed = run_fresh(
        """
        import torch, tree, dynamo_tree_compat
        from dynamo_tree_compat import installer
        fn = torch.compile(lambda x: tree.flatten([x]), fullgraph=True, backend="eager")
        fn(torch.ones(1))
        dynamo_tree_compat.uninstall()
        print(installer.REGISTERED == {}, dynamo_tree_compat.status().mode)
        try:
            fn(torch.ones(1))
            print("traced")
        except torch._dynamo.exc.Unsupported:
            print("graph break")
        dynamo_tree_compat.install()
        print(fn(torch.ones(1)), dynamo_tree_compat.status().activated_by)
        """
    )
    assert completed.stdout.strip().splitlines() == [
        "True off",
        "graph break",
        "[tensor([1.])] install()",
    ]


def test_status_is_structured() -> None:
    report = dynamo_tree_compat.status()
    assert report.versions["torch"] == metadata.version("torch")
    assert report.versions["dm-tree"] == metadata.version("dm-tree")
    assert report.mode == "on"
    assert report.activated_by in ("import", "autoload", "install()")
    assert report.dynamo_imported
    assert report.functions["tree.flatten"] == "registered"
    assert "tree.flatten: registered" in str(report)


def test_autoload_loads_only_the_small_modules_and_reports_its_cost() -> None:
    """What loading the entry point adds to `import torch`: only these four modules.

    The figure comes from benchmarks/eager_overhead.py; tests make no timing assertions.
    """
    completed = run_fresh(
        """
        import sys, time
        import torch
        print(sorted(m for m in sys.modules if m.startswith("dynamo_tree_compat")))
        """
    )
    assert completed.stdout.strip() == str(
        [
            "dynamo_tree_compat",
            "dynamo_tree_compat._dynamo",
            "dynamo_tree_compat._dynamo.runtime",
            "dynamo_tree_compat._dynamo.seam",
            "dynamo_tree_compat._dynamo.seam.lock",
            "dynamo_tree_compat.activation",
            "dynamo_tree_compat.autoload",
            "dynamo_tree_compat.config",
            "dynamo_tree_compat.originals",
        ]
    )


def test_threads_scoping_and_installing_while_dynamo_is_imported() -> None:
    """8 threads enter scopes and install/uninstall while another imports Dynamo.

    Regression test: a scope's registration waited for Dynamo's import lock while holding
    ours, and the importing thread's post-import hook waited for ours: a deadlock.
    """
    completed = run_fresh(
        """
        import faulthandler, threading
        faulthandler.dump_traceback_later(120, exit=True)  # a deadlock fails, loudly
        import torch, tree, dynamo_tree_compat
        from dynamo_tree_compat import installer, substitutions
        errors = []
        go = threading.Barrier(9)

        def churn(index):
            try:
                go.wait(30)
                for _ in range(50):
                    if index % 4 == 0:
                        dynamo_tree_compat.uninstall()
                        dynamo_tree_compat.install()
                    scope = dynamo_tree_compat.enabled if index % 2 else dynamo_tree_compat.disabled
                    with scope():
                        dynamo_tree_compat.status()
            except Exception as error:
                errors.append(repr(error))

        churners = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
        for thread in churners:
            thread.start()
        go.wait(30)
        import torch._dynamo  # the post-import hook runs while the churners hold the lock
        for thread in churners:
            thread.join(60)
        dynamo_tree_compat.install()
        fn = torch.compile(lambda x: tree.flatten([x, (x,)]), backend="eager", fullgraph=True)
        print(errors, sum(t.is_alive() for t in churners),
              set(installer.REGISTERED) == {
                  s.original_name for lib in substitutions.LIBRARIES.values() for s in lib.rows
                  if s.original() is not None and installer.needed(s)},
              len(fn(torch.ones(1))))
        """,
        timeout=300,
    )
    assert completed.stdout.strip() == "[] 0 True 2"
