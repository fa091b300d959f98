"""Tree specs with custom nodes, made and read from their records: never by calling the
user's functions while tracing.

optree's C code calls a custom node's flatten function to read the node and its
unflatten function to make one. While tracing, the package calls them through Dynamo
only, as often as eager optree does; so a skeleton holds a *marker* where the structure
has a custom node: a plain list of the node's children, with the node's class, metadata
and entries kept beside it (:class:`Markers`). optree's C code runs on the skeleton, where
a marker is a list; a spec's records (``PyTreeSpec.__getstate__``, in post-order, the same
layout from optree 0.13 to 0.20) then turn each marker's list into the custom node it
stands for, and back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["Custom", "Markers", "Slot", "aligned", "custom_spec", "plain", "traverse"]

#: A record's fields: kind, arity, node data, entries, type, leaves, nodes, original keys.
Record = tuple[Any, ...]


class Custom(NamedTuple):
    """A custom node read while tracing: its class, metadata and entries (or None)."""

    cls: type
    metadata: Any
    entries: tuple[Any, ...] | None


class Markers:
    """The markers of one skeleton, by identity; each is kept alive here, so that no other
    list takes its id.

    >>> markers = Markers(); marker = markers.add([1, 2], Custom(dict, None, None))
    >>> markers.get(marker).cls, markers.get([1, 2])
    (<class 'dict'>, None)
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[list[Any], Custom]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def add(self, children: list[Any], custom: Custom) -> list[Any]:
        self._by_id[id(children)] = (children, custom)
        return children

    def get(self, node: Any) -> Custom | None:
        found = self._by_id.get(id(node))
        return found[1] if found is not None and found[0] is node else None


class Slot:
    """A numbered placeholder for one leaf in a skeleton: optree takes it as a leaf.

    >>> [Slot(2), Slot(0)]
    [<leaf 2>, <leaf 0>]
    """

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<leaf {self.index}>"


def _kind(name: str) -> int:
    import optree

    return int(getattr(optree.PyTreeKind, name))


def _records(spec: Any) -> list[Record]:
    return list(spec.__getstate__()[0])


def _from_records(records: list[Record], none_is_leaf: bool, namespace: str) -> Any:
    """A spec of these records (optree checks each custom type's registration in the
    namespace, as its unpickling does)."""
    import optree

    made = optree.PyTreeSpec.__new__(optree.PyTreeSpec)
    made.__setstate__((tuple(records), none_is_leaf, namespace))
    return made


def _post_order(skeleton: Any, markers: Markers, none_is_leaf: bool, namespace: str) -> list[Any]:
    """The skeleton's nodes and leaves in optree's post-order: its records' order."""
    import optree

    order: list[Any] = []
    agenda: list[tuple[Any, bool]] = [(skeleton, False)]
    while agenda:
        node, expanded = agenda.pop()
        if expanded or type(node) is Slot or (node is None and none_is_leaf):
            order.append(node)
            continue
        if markers.get(node) is not None:
            children = list(node)
        elif node is None:
            children = []
        else:
            options = {"none_is_leaf": none_is_leaf, "namespace": namespace}
            children = list(optree.tree_flatten_one_level(node, **options)[0])
        agenda.append((node, True))
        agenda.extend((child, False) for child in reversed(children))
    return order


def _paired(
    tree: Any, records: list[Record], markers: Markers, none_is_leaf: bool, namespace: str
) -> list[tuple[Any, Record]]:
    """Each node and leaf of ``tree`` (a skeleton, or one rebuilt from a plain spec) with
    its record: both in optree's post-order."""
    nodes = _post_order(tree, markers, none_is_leaf, namespace)
    if len(nodes) != len(records):  # cannot be: optree read or made the same tree
        raise ValueError("a tree read in another order than optree's")
    return list(zip(nodes, records))


def custom_spec(plain: Any, skeleton: Any, markers: Markers, namespace: str) -> Any:
    """The spec of the structure ``skeleton`` stands for: ``plain`` (optree's spec of the
    skeleton) with each marker's list record made its custom node's. Such a spec has the
    namespace asked for, as optree's has where it meets a custom node."""
    if not markers:
        return plain
    records = _records(plain)
    paired = _paired(skeleton, records, markers, plain.none_is_leaf, namespace)
    for index, (node, _) in enumerate(paired):  # the namespace asked for: its dict order
        custom = markers.get(node)
        if custom is not None:
            _, arity, _, _, _, leaves, count, _ = records[index]
            records[index] = (
                _kind("CUSTOM"), arity, custom.metadata, custom.entries, custom.cls,
                leaves, count, None,
            )  # fmt: skip
    return _from_records(records, plain.none_is_leaf, namespace)


def _plain_and_nodes(spec: Any) -> tuple[Any, list[Custom | None]]:
    """(``spec`` with a list for each custom node, what each node record was: its custom
    node, or None), the records in post-order, leaves left out; ValueError where a custom
    node's registration changed since the spec was made."""
    records = _records(spec)
    custom, leaf = _kind("CUSTOM"), _kind("LEAF")
    nodes: list[Custom | None] = []
    for index, (kind, arity, data, entries, cls, leaves, count, _) in enumerate(records):
        if kind == leaf:
            continue
        nodes.append(Custom(cls, data, entries) if kind == custom else None)
        if kind == custom:
            records[index] = (_kind("LIST"), arity, None, None, None, leaves, count, None)
    if not any(nodes):
        return spec, nodes
    _check_registrations(spec)
    return _from_records(records, spec.none_is_leaf, spec.namespace), nodes


def plain(spec: Any) -> Any:
    """``spec`` with a list where it has a custom node (what a skeleton's marker reads as);
    ValueError where a custom node's registration changed since the spec was made."""
    return _plain_and_nodes(spec)[0]


def _check_registrations(spec: Any) -> None:
    """Raises ValueError unless each custom node of ``spec`` is registered now as when the
    spec was made: optree rebuilds a node with the functions its spec holds, this package
    with those the registry holds now (optree's equality compares the registrations)."""
    try:
        now = _from_records(_records(spec), spec.none_is_leaf, spec.namespace)
    except Exception as error:  # unregistered since: optree's own call decides
        raise ValueError(f"a custom node no longer registered: {error}") from error
    if now != spec:
        raise ValueError("a custom node registered again since the spec was made")


def traverse(
    spec: Any,
    leaves: list[Any],
    markers: Markers,
    f_node: Callable[[Any], Any] | None = None,
    f_leaf: Callable[[Any], Any] | None = None,
) -> Any:
    """``spec.traverse(leaves, f_node, f_leaf)`` with a marker (added to ``markers``) for
    each custom node rebuilt: optree's own traversal, in its order, with no call of an
    unflatten function. ``spec.unflatten(leaves)`` is ``traverse(spec, leaves, markers)``.
    """
    plain_spec, nodes = _plain_and_nodes(spec)
    if not hasattr(plain_spec, "traverse"):  # optree before 0.14: unflatten, then pair
        if f_node is not None or f_leaf is not None:
            raise ValueError("this optree has no PyTreeSpec.traverse")
        return _unflatten_paired(spec, plain_spec, leaves, markers)
    remaining = iter(nodes)

    def on_node(node: Any) -> Any:
        custom = next(remaining)  # optree rebuilds nodes in post-order: the records' order
        if custom is not None:
            node = markers.add(node, custom)
        return node if f_node is None else f_node(node)

    return plain_spec.traverse(leaves, on_node, f_leaf)


def _unflatten_paired(spec: Any, plain_spec: Any, leaves: list[Any], markers: Markers) -> Any:
    """``plain_spec.unflatten(leaves)``, each list that stands for one of ``spec``'s custom
    nodes added to ``markers``: the rebuilt nodes paired with ``spec``'s records, in
    post-order (``leaves`` are slots: the walk knows them)."""
    rebuilt = plain_spec.unflatten(leaves)
    custom = _kind("CUSTOM")
    paired = _paired(rebuilt, _records(spec), markers, spec.none_is_leaf, spec.namespace)
    for node, (kind, _, data, entries, cls, *_) in paired:
        if kind == custom:
            markers.add(node, Custom(cls, data, entries))
    return rebuilt


def aligned(spec: Any, skeleton: Any, markers: Markers) -> bool:
    """Whether each custom node of ``spec`` meets a marker of the same class and equal
    metadata in ``skeleton``, and each other node no marker (``flatten_up_to`` on the
    plain spec has checked the rest)."""
    leaf, custom_kind = _kind("LEAF"), _kind("CUSTOM")
    dict_kinds = {_kind("DICT"), _kind("ORDEREDDICT"), _kind("DEFAULTDICT")}
    built: list[tuple[Record, list[Any]]] = []
    for record in _records(spec):  # post-order: a node's children come just before it
        arity = record[1]
        children = built[len(built) - arity :] if arity else []
        del built[len(built) - arity :]
        built.append((record, children))
    agenda = [(built[0], skeleton)]
    while agenda:
        ((kind, _, data, _, cls, *_), children), node = agenda.pop()
        if kind == leaf:
            continue
        found = markers.get(node)
        if (found is not None) != (kind == custom_kind):
            return False
        if found is not None:
            try:
                if found.cls is not cls or not bool(found.metadata == data):
                    return False
            except Exception:  # noqa: BLE001 - metadata that cannot compare: optree's call
                return False
        if kind in dict_kinds:
            keys = data[1] if kind == _kind("DEFAULTDICT") else data
            parts = [node[key] for key in keys]
        else:
            parts = [] if node is None else list(node)
        agenda.extend(zip(children, parts))
    return True
