"""The registry of implemented generators: name → "module:Class", imported on first use.

Importing this module (or `pipelines.generators`) imports no generator: torch, jax and each method's
dependencies load only when `generator_class(name)` is called. Lifecycle, as the train stage drives it:

  gen = make_generator(name, layout, params, device)
  gen.fit(X, session, budget, noise)  # 1. plan(len(X), budget): data-independent, public row count only
                                      # 2. session.reserve(plan.events): refused here, before X is converted
                                      # 3. train; 4. session.record(actual events)
  gen.save(dir); load_generator(name, dir); gen.sample(n, rng)

The lifecycle itself is `pipelines.generators.base.PrivateGenerator`; each generator's parameters are
`pipelines.generators.params.<name>` (no torch), which `pipelines.config` reads to check params.yaml; the names
(`GENERATORS`) and those modules are `pipelines.generators.names`, which imports neither.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pipelines.data.layout import Layout
from pipelines.generators.base import PrivateGenerator, resolve_device
from pipelines.generators.names import CLASSES, GENERATORS
from pipelines.parameters import GeneratorParams


def generator_class(name: str) -> type[PrivateGenerator]:
    """The class implementing generator `name`, its module imported now (torch is slow to import)."""
    if name not in CLASSES:
        raise ValueError(f"unknown generator {name!r}; implemented: {', '.join(GENERATORS)}")
    module, _, cls = CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def make_generator(
    name: str, layout: Layout, params: GeneratorParams | dict[str, Any] | None, device: str = "auto"
) -> PrivateGenerator:
    """Generator `name` built from its params.yaml section (networks initialised from its public seed)."""
    return generator_class(name)(layout=layout, params=params, device=resolve_device(device))


def load_generator(name: str, directory: Path) -> PrivateGenerator:
    """Generator `name` as saved in `directory` by its `save`."""
    return generator_class(name).load(Path(directory))
