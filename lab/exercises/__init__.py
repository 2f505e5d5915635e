"""Exercise checkers, one module per lesson that has exercises (``lesson01`` … ``lesson14``), on one shared harness
(:mod:`lab.exercises.harness`). A lesson imports its module as ``check``::

    from lab.exercises import lesson07 as check
    check.next_position(next_position)     # prints ✓ or ✗ with a hint, returns a bool, never raises

Each lesson module also holds the reference answers a lesson falls back to while an exercise is unsolved
(``reference_<exercise>``). This package is the top layer: nothing else in ``lab`` imports it.
"""
