"""The seam: the only folder that imports or names ``torch._dynamo`` (``torch._logging``,
``torch._C._dynamo``, ``torch.compiler``), or touches an attribute of Dynamo's objects.

- :mod:`.internals`: every read; :mod:`.making`: the constructors of Dynamo's variables;
  :mod:`.variables`: the variable classes built on Dynamo's; :mod:`.patches`: every
  change made to Dynamo; :mod:`.capabilities`: what this Dynamo can do, asked by trying
  it; :mod:`.lock`: the compile lock and the log name, light, for autoload;
  :mod:`.frames`: the hook on Dynamo's first frame, light, for the post-import hook;
  :mod:`.sets`, :mod:`.constants`: workarounds for Dynamo's own bugs;
  :mod:`.log_format`: Dynamo's graph-break log.

The rule, held by ``tests/internals/test_seam.py`` over every module outside this folder:
no import of those modules in any form (``import``, ``from``, ``importlib``,
``__import__``, a computed name); no attribute, ``getattr``, ``hasattr``, ``setattr`` or
``delattr`` of a name in :data:`DYNAMO_NAMES` or of a private name, whatever the receiver
is called; the few exceptions are exact ``(module, name)`` pairs in :data:`EXCEPTIONS`,
each with its reason. Supporting a new torch means editing this folder alone.

Do not import a submodule here: autoload loads this package with :mod:`.lock`.
"""

from __future__ import annotations

__all__ = ["DYNAMO_NAMES", "EXCEPTIONS", "Missing"]


class Missing(Exception):
    """What this package reads is not in this torch's Dynamo (:mod:`.internals` raises
    it, and :mod:`.frames`, which loads without it)."""


#: Attributes of Dynamo's objects (variables, translators, builders, sources, output
#: graphs) that this package reads or overrides: outside the seam, no receiver of any
#: name may be asked for one. ``tests/internals/test_seam.py`` adds every name that the
#: installed torch's Dynamo classes define, found from the classes themselves. Names
#: that Python's own objects share (``items``, ``value``, ``source``) are read through
#: :func:`.internals.read` alone, which fault injection breaks one name at a time.
DYNAMO_NAMES = frozenset(
    {
        "as_proxy",
        "as_python_constant",
        "call_function",
        "call_method",
        "create_with_source",
        "f_code",
        "f_globals",
        "get_code",
        "install_global",
        "install_guards",
        "is_python_constant",
        "make_guard",
        "mutation_type",
        "python_type",
        "realize",
        "reconstruct",
        "side_effects",
        "symbolic_locals",
        "unpack_var_sequence",
        "var_getattr",
    }
)

#: What a module outside the seam may still name, as exact ``(module, name)`` pairs, with
#: why. A name listed for one module is allowed in that module alone.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("_dynamo/__init__.py", "importlib.import_module"): (
        "the contract loads this package's own modules by name, on first use"
    ),
    ("installer.py", "importlib.import_module"): (
        "a substitution row's ``unless_present``: a mirrored library's module, by name"
    ),
    ("substitutions.py", "hasattr:_tree"): "dm-tree is told from another ``tree`` by its C core",
    ("_dynamo/runtime.py", "getattr:_initializing"): (
        "Python's module spec says whether a module is still being imported"
    ),
    ("twins/dmtree/_nodes.py", "getattr:_fields"): "a namedtuple's fields, as dm-tree reads them",
    ("twins/dmtree/_nodes.py", "hasattr:_fields"): "a namedtuple's fields, as dm-tree reads them",
}
