"""POT (Python Optimal Transport) for the exact transport costs the evaluation computes on NumPy arrays.

POT registers a backend for every array library it can import: PyTorch and JAX among them, JAX alone a noticeable part
of a stage's start, and the evaluation passes NumPy arrays only. `pot()` imports it with the JAX,
TensorFlow and CuPy backends switched off (POT's documented `POT_BACKEND_DISABLE_*` variables, set only where the
caller's environment leaves them unset); PyTorch's stays, since the stages that import POT have imported torch."""

from __future__ import annotations

import os
from types import ModuleType

_UNUSED_BACKENDS = ("POT_BACKEND_DISABLE_JAX", "POT_BACKEND_DISABLE_TENSORFLOW", "POT_BACKEND_DISABLE_CUPY")


def pot() -> ModuleType:
    """The `ot` module, imported (once per process) without the backends the evaluation never uses."""
    for name in _UNUSED_BACKENDS:
        os.environ.setdefault(name, "1")
    import ot

    return ot
