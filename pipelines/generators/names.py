"""The implemented generators' names, and where each one's class and parameters live: no generator imported.

What reads a configuration (pipelines/config.py, the fingerprint, the private selection's candidates) needs the
names and the parameters modules (pipelines/generators/params/<name>.py, no torch) and not the lifecycle, which
`pipelines.generators.registry` imports (with the privacy accounting and the ledger) to build one.
"""

from __future__ import annotations

CLASSES: dict[str, str] = {
    "dpwgan": "pipelines.generators.dpwgan:DPWGAN",
    "ppem": "pipelines.generators.ppem:PPEM",
    "dp_auto_gan": "pipelines.generators.dp_auto_gan:DPAutoGAN",
    "pearl": "pipelines.generators.pearl:PEARL",
    "iw_mmd_gan": "pipelines.generators.iw_mmd_gan:IWMMDGAN",
    "support_points": "pipelines.generators.support_points:SupportPoints",
    "mst": "pipelines.generators.mst:MST",
    "aim": "pipelines.generators.aim:AIM",
    "private_selection": "pipelines.generators.private_selection:PrivateSelection",  # select: private
}
GENERATORS: tuple[str, ...] = tuple(CLASSES)  # the registry's names, in release order


def params_module(name: str) -> str:
    """The module holding generator `name`'s `Params`, not imported."""
    if name not in CLASSES:
        raise ValueError(f"unknown generator {name!r}; implemented: {', '.join(GENERATORS)}")
    return f"pipelines.generators.params.{name}"
