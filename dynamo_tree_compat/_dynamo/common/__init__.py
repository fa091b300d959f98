"""What the libraries share: reading structures from variables, guards, skeletons, held
constants, trivial bodies, the probe structure.

It imports the seam and :mod:`..runtime` alone, never a library folder (``dmtree``,
``optree``, ``pytree``): what two libraries share moves here.
"""
