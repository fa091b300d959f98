"""dm-tree at Dynamo's variable level: its fast path, readers and probe.

It imports :mod:`..common`, the seam and :mod:`..runtime`, never another library folder
(``tests/internals/test_layout.py`` holds it).
"""
