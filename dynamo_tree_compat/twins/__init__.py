"""The twins: pure-Python functions that Dynamo traces in place of a library's own.

One module or folder a library, each importing nothing of the rest of the package:

- :mod:`.dmtree`: dm-tree's whole API (public as ``dynamo_tree_compat.dmtree``);
- :mod:`.optree`: the optree functions whose own code Dynamo cannot follow;
- :mod:`.keras`: Keras's tree layer, where Dynamo cannot trace Keras's own code.

``substitutions.py`` pairs each with its original.
"""
