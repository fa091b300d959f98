"""Activation: on import, through torch's autoload, in scopes; and the status report.

Nothing here imports torch, ``torch._dynamo``, dm-tree or optree: this module loads into
every program that imports torch, so it only arms a post-import hook. The twins are
registered once ``torch._dynamo`` and a mirrored library are both imported, whichever
comes first.

The mode (``config.twins_enabled``) is process-wide, like ``torch._dynamo.config``: a scope
entered in one thread applies to what every thread traces until it exits. Every change
of the mode or of the registrations waits for a compile in progress to end (it takes
Dynamo's compile lock), so no compile sees half a change.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
import warnings
from collections.abc import Sequence
from typing import Any

from . import _dynamo, config, originals
from ._dynamo import runtime
from ._dynamo.seam.lock import DYNAMO_MODULE, compile_lock

__all__ = [
    "ENV_SWITCH",
    "STATE",
    "DynamoTreeCompatWarning",
    "Registration",
    "State",
    "activate",
    "disabled",
    "enabled",
    "importable",
    "install",
    "uninstall",
]

#: Set to ``0`` to turn off activation on import and through autoload.
ENV_SWITCH = "DYNAMO_TREE_COMPAT"
#: The import names of the mirrored libraries (Keras's tree layer: the module of each).
LIBRARY_MODULES = (
    "tree",
    "optree",
    *(f"keras.src.tree.{layer}_impl" for layer in ("torchtree", "optree")),
)


class Registration(enum.Enum):
    """When the twins register, once the hook is armed."""

    NOT_STARTED = "Dynamo not imported yet"
    AT_FIRST_FRAME = "at Dynamo's first frame"
    """Dynamo is imported: the first registration waits for its first frame."""
    AS_LIBRARIES_LOAD = "now, and as each library loads"
    """Dynamo took up its first frame (or could not be made to wait for it)."""


class State:
    """Activation's state, the one object that holds it: each entry point below is a
    transition, made under :attr:`lock` (and Dynamo's compile lock where a compile could
    see half a change).

    >>> State().registration is Registration.NOT_STARTED
    True
    """

    def __init__(self) -> None:
        #: On by import, autoload or :func:`install`, off by :func:`uninstall`.
        self.globally_enabled = False
        #: Open scopes, oldest first, as (token, on); scopes in threads need not nest.
        self.scopes: list[tuple[object, bool]] = []
        #: How the package was activated: "import", "autoload", "install()", or None.
        self.activated_by: str | None = None
        #: Whether the post-import hook registers the twins (by activation or a scope).
        self.armed = False
        #: Whether this process records its graphs and breaks for ``explain``.
        self.recording = False
        #: Whether the package's one warning was given.
        self.warned = False
        self.registration = Registration.NOT_STARTED
        self.lock = threading.RLock()


#: This process's activation.
STATE = State()


def __getattr__(name: str) -> Any:
    """``activated_by`` and ``armed``, read from :data:`STATE`, as earlier releases had
    them."""
    if name in ("activated_by", "armed"):
        return getattr(STATE, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DynamoTreeCompatWarning(RuntimeWarning):
    """dynamo-tree-compat could not activate; torch keeps its own behaviour."""


def switched_off() -> bool:
    """Whether ``DYNAMO_TREE_COMPAT=0`` turns off global activation."""
    return os.environ.get(ENV_SWITCH, "1").strip() == "0"


def warn_once(reason: str) -> None:
    """Issues the package's single warning; later failures stay silent."""
    if not STATE.warned:
        STATE.warned = True
        warnings.warn(
            f"dynamo-tree-compat is doing nothing: {reason}", DynamoTreeCompatWarning, stacklevel=3
        )


def _ready(module_name: str) -> bool:
    """Whether a module is imported and done initializing."""
    return sys.modules.get(module_name) is not None and not runtime.half_imported(module_name)


def _register_now(hooked: str | None = None) -> None:
    """Registers the twins of the mirrored libraries imported, once Dynamo is (torch's
    own pytree is loaded with torch: its rows register with Dynamo).

    A module another thread is still importing counts as not imported: waiting for its
    import lock while holding ours could deadlock with that thread's hook, which
    registers the twins itself once the module is ready. ``hooked`` is the module whose
    post-import hook calls: it is ready, though the import system has not said so yet.
    """

    def ready(name: str) -> bool:
        return name in sys.modules and (name == hooked or _ready(name))

    if not ready(DYNAMO_MODULE):
        return
    try:
        from . import installer

        outcomes = installer.install(wait=hooked is None)
    except Exception as error:  # noqa: BLE001 - must never break the user's program
        warn_once(f"registering the twins failed with {type(error).__name__}: {error}")
        return
    distinct = set(outcomes.values())
    if len(distinct) == 1:
        outcome = distinct.pop()
        if outcome.torch_unsupported:  # too old, or outside the tested releases
            warn_once(str(outcome))


class _NotifyingLoader:
    """Runs the real loader, then tells the watcher the module is ready."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        # Put the real loader back first, for anything that inspects the module.
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _on_imported(module.__name__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class _ImportWatcher:
    """A post-import hook for Dynamo and the mirrored libraries, quiet unless armed.

    Once on ``sys.meta_path`` it stays there: taking it off while another thread's import
    walks that list would make the walk skip the next finder (Python 3.10 then reported
    modules such as ``sympy.core.sympify`` as missing).
    """

    watched = frozenset((DYNAMO_MODULE, *LIBRARY_MODULES, *originals.MODULES))

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not (STATE.armed or STATE.recording) or fullname not in self.watched:
            return None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _NotifyingLoader(spec.loader)
                return spec
        return None


_watcher = _ImportWatcher()


def importable(module_name: str) -> bool:
    """Whether ``module_name`` can be imported, without importing it or its parents.

    ``importlib.util.find_spec`` imports a dotted name's parent packages (all of Keras,
    for ``keras.src.tree.torchtree_impl``); this walks their search paths instead.

    >>> importable("json.decoder"), importable("json.no_such_module"), importable("no_such")
    (True, False, False)
    """
    if module_name in sys.modules:
        return sys.modules[module_name] is not None
    head, _, rest = module_name.partition(".")
    try:
        spec = _spec_of(head) if head in sys.modules else importlib.util.find_spec(head)
        name = head
        for part in rest.split(".") if rest else ():
            if spec is None or not spec.submodule_search_locations:
                return False
            name = f"{name}.{part}"
            spec = (
                _spec_of(name)
                if name in sys.modules
                else (
                    importlib.machinery.PathFinder.find_spec(name, spec.submodule_search_locations)
                )
            )
        return spec is not None
    except (ImportError, ValueError):
        return False


def _spec_of(module_name: str) -> importlib.machinery.ModuleSpec | None:
    return getattr(sys.modules[module_name], "__spec__", None)


def _register_at_first_frame() -> None:
    """Defers the first registration to Dynamo's first frame: a process that imports
    Dynamo and never compiles pays nothing more. Where Dynamo's frame check cannot be
    hooked, or this torch is outside the supported releases or cannot substitute (which
    warns at once), registers now."""
    if STATE.registration is not Registration.NOT_STARTED:
        return
    try:
        if config.torch_in_range(config.any_torch):  # else registering warns now
            _dynamo.substitute_in_graph()  # raises where this torch cannot substitute
            _dynamo.before_each_frame(_first_frame, captures_too=True)
            STATE.registration = Registration.AT_FIRST_FRAME
            return
    except Exception as error:  # noqa: BLE001 - Dynamo's internals moved: register now
        runtime.LOG.debug("could not wait for Dynamo's first frame: %r", error)
    STATE.registration = Registration.AS_LIBRARIES_LOAD
    _register_now(hooked=DYNAMO_MODULE)


def _first_frame() -> bool:
    """Run by Dynamo's check of its first frame, before it traces: registers."""
    STATE.registration = Registration.AS_LIBRARIES_LOAD
    if STATE.armed:
        with STATE.lock:
            _register_now()
        installer = sys.modules.get("dynamo_tree_compat.installer")
        if installer is not None:  # on a build nobody has seen: the trials, now
            installer.settle()
    return True


def register_pending() -> None:
    """Registers now what waits for Dynamo's first frame (``status()`` asks this, so
    that it reports what a compile would meet). Never raises."""
    try:
        if STATE.registration is Registration.AT_FIRST_FRAME and STATE.armed:
            STATE.registration = Registration.AS_LIBRARIES_LOAD
            with STATE.lock:
                _register_now()
    except Exception as error:  # noqa: BLE001 - a report must not break the program
        warn_once(f"registering the twins failed with {type(error).__name__}: {error}")


def _on_imported(name: str) -> None:
    try:
        if name in originals.MODULES:
            originals.capture(sys.modules.get(name))
        stage = STATE.registration
        if STATE.armed and stage is not Registration.AS_LIBRARIES_LOAD and name == DYNAMO_MODULE:
            _register_at_first_frame()
        elif STATE.armed and stage is not Registration.AT_FIRST_FRAME:
            _register_now(hooked=name)
        if STATE.recording and name == DYNAMO_MODULE:
            _start_recording()
    except Exception as error:  # noqa: BLE001 - runs inside the user's import statement
        warn_once(f"the post-import hook for {name} failed: {error}")


def _start_recording() -> None:
    from . import recording as records

    records.start()


def _after_fork() -> None:
    """A forked child (a data-loader worker, a fork-context process) records too."""
    try:
        if STATE.recording and _ready(DYNAMO_MODULE):
            _start_recording()
    except Exception:  # noqa: BLE001 - recording must never break the child
        pass


def record() -> None:
    """For ``explain``: where it asked (``DYNAMO_TREE_COMPAT_RECORD``), this process
    records its graphs and breaks once Dynamo is imported, whether the package is on or
    off. Elsewhere it does nothing. Never raises."""
    if STATE.recording or not os.environ.get(config.ENV_RECORD):
        return
    try:
        with STATE.lock:
            STATE.recording = True
            if _watcher not in sys.meta_path:
                sys.meta_path.insert(0, _watcher)
            os.register_at_fork(after_in_child=_after_fork)
        if _ready(DYNAMO_MODULE):
            _start_recording()
    except Exception as error:  # noqa: BLE001 - runs inside import torch
        warn_once(f"recording for explain failed with {type(error).__name__}: {error}")


def arm() -> None:
    """Registers the twins now if their modules are loaded, and as soon as they load."""
    with STATE.lock:
        if not STATE.armed:
            STATE.armed = True
            originals.capture_loaded()
            if _watcher not in sys.meta_path:
                sys.meta_path.insert(0, _watcher)
        _register_now()


def activate(how: str) -> bool:
    """Global activation, as on import or autoload; does nothing if switched off.

    Returns whether the package is active afterwards. Never raises.
    """
    record()
    try:
        if switched_off():
            return False
        with compile_lock(), STATE.lock:
            # The autoload entry point imports the package first: it names the real cause.
            if STATE.activated_by is None or (how, STATE.activated_by) == ("autoload", "import"):
                STATE.activated_by = how
            STATE.globally_enabled = True
            _set_mode()
            arm()
        return True
    except Exception as error:  # noqa: BLE001 - runs inside import torch
        warn_once(f"activation failed with {type(error).__name__}: {error}")
        return False


def install() -> None:
    """Activates the package explicitly, whatever ``DYNAMO_TREE_COMPAT`` says.

    Takes nothing and returns None. Idempotent. Registers the twins now where Dynamo and
    the libraries are loaded, else as they load; it waits for a compile in progress in
    another thread to end. It never raises: where registering fails, one
    :class:`DynamoTreeCompatWarning` says why, and the libraries stay torch's.

    >>> import dynamo_tree_compat
    >>> dynamo_tree_compat.install()
    >>> dynamo_tree_compat.status().mode
    'on'
    """
    with compile_lock(), STATE.lock:
        if STATE.activated_by is None:
            STATE.activated_by = "install()"
        STATE.globally_enabled = True
        _set_mode()
        arm()


def uninstall() -> None:
    """Removes every registration and quiets the import hook; traced code breaks as before.

    Takes nothing and returns None; never raises. A function compiled before recompiles
    at its next call (Dynamo guards on the mode). An :func:`enabled` scope opened
    afterwards registers the twins again for what it traces; :func:`install` undoes it.

    >>> import dynamo_tree_compat
    >>> dynamo_tree_compat.uninstall()
    >>> dynamo_tree_compat.status().mode
    'off'
    >>> dynamo_tree_compat.install()
    """
    with compile_lock(), STATE.lock:
        STATE.globally_enabled = False
        _set_mode()
        STATE.activated_by = None
        STATE.armed = False  # the watcher goes quiet; it stays on sys.meta_path (see above)
        if "dynamo_tree_compat.installer" in sys.modules:
            from . import installer

            installer.uninstall()


def _set_mode() -> None:
    # The flag the registered gates read and Dynamo guards on.
    on = STATE.scopes[-1][1] if STATE.scopes else STATE.globally_enabled
    if on != config.twins_enabled:
        if runtime.TRACED_CODE:  # a frame skipped in one mode is tried again in the other
            _dynamo.forget_skips()
    config.twins_enabled = on


class _Mode(contextlib.ContextDecorator):
    """Sets the mode for what is traced inside; on exit, the mode of what is still open."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self._tokens: dict[int, list[object]] = {}  # by thread: one instance, many threads

    def __enter__(self) -> _Mode:
        token = object()
        with compile_lock(), STATE.lock:
            if self.on:
                arm()
            self._tokens.setdefault(threading.get_ident(), []).append(token)
            STATE.scopes.append((token, self.on))
            _set_mode()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with compile_lock(), STATE.lock:
            tokens = self._tokens[threading.get_ident()]
            token = tokens.pop()
            if not tokens:
                del self._tokens[threading.get_ident()]
            STATE.scopes[:] = [scope for scope in STATE.scopes if scope[0] is not token]
            _set_mode()


def enabled() -> _Mode:
    """Traces tree calls with the twins inside this scope, whatever the global setting.

    Usable as a context manager or a decorator; takes nothing, and the context manager
    yields the scope object itself. Scopes nest (the innermost wins) and are per thread.
    Dynamo guards on the mode: a function compiled inside and called outside recompiles
    once. Never raises, and does not swallow what the block raises.

    >>> import dynamo_tree_compat
    >>> with dynamo_tree_compat.enabled():
    ...     dynamo_tree_compat.status().mode
    'on'
    """
    return _Mode(True)


def disabled() -> _Mode:
    """Lets tree calls break the graph inside this scope, as without this package.

    The opposite of :func:`enabled`, used the same way: a context manager or a
    decorator, nesting per thread, guarded by Dynamo. Eager calls are the libraries' own
    code either way.

    >>> import dynamo_tree_compat
    >>> with dynamo_tree_compat.disabled():
    ...     dynamo_tree_compat.status().mode
    'off'
    """
    return _Mode(False)
