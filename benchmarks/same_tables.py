"""Behaviour unchanged: each generator's synthetic table at fixed noise seeds, through the stages, as one hash.

    python -m benchmarks.same_tables                       # this checkout
    git worktree add /tmp/old <rev> && python /tmp/old/benchmarks/same_tables.py --root /tmp/old   # another

A scratch copy of the checkout `--root` (its code, schemas, dvc.yaml and params.yaml) on the bundled breast cancer
table, every generator listed and small, `release.select: all`; the split keyed by a fixed steward key, every DP
noise stream by a fixed `noise_seed` (an internal release: a seed's noise does not depend on the code, a steward
key's does), then `synthrelease stage validate / prepare / budget / train --generator G` in that copy, with its
own code. Each trained model samples 455 rows with the public seed 0, decoded to the schema (evaluate's
`synthetic_table`); the line per generator is the sha256 of that table as CSV. Two checkouts whose lines are equal
publish the same tables. A benchmark reads real rows: its figures are not release artefacts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

GENERATORS = ("dpwgan", "ppem", "dp_auto_gan", "pearl", "support_points", "iw_mmd_gan", "mst", "aim")
SMALL = {
    "dpwgan": {"steps": 40, "batch_size": 64},
    "ppem": {"steps": 10, "hidden": 16, "latent_dim": 8, "gate_bootstrap": 200, "gate_permutations": 200},
    "dp_auto_gan": {"autoencoder_steps": 40, "steps": 40, "batch_size": 64},
    "pearl": {"frequencies": 16, "steps": 20, "batch_size": 64},
    "support_points": {"n_points": 10, "burn_in": 500, "steps": 2000},
    "iw_mmd_gan": {"steps": 50},
    "mst": {"n_bins": 8, "iters": 200},
    "aim": {"n_bins": 8, "max_rounds": 1, "iters": 50, "final_iters": 200},
}
STEWARD_KEY = "ab" * 32
SAMPLE = (
    "import hashlib, sys; from pathlib import Path; from pipelines.data.schema import load_schema; "
    "from pipelines.data.transform import Encoder; from pipelines.generators.registry import load_generator; "
    "name, ds = sys.argv[1:]; sch = load_schema(f'schemas/{ds}.yaml'); "
    "t = Encoder(sch).decode(load_generator(name, Path(f'models/{ds}/{name}')).sample(455, 0)); "
    "print(hashlib.sha256(t.to_csv().encode()).hexdigest())"
)


def scratch_project(source: Path, scratch: Path) -> tuple[Path, str]:
    """The copy (module docstring) and its data set's name."""
    root = scratch / "repo"
    for item in ("pipelines", "tasks", "flows", "schemas"):
        shutil.copytree(source / item, root / item, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(source / "dvc.yaml", root / "dvc.yaml")
    key = scratch / "steward.key"
    key.write_text(STEWARD_KEY + "\n")
    params = yaml.safe_load((source / "params.yaml").read_text())
    params.update(generators=list(GENERATORS), release={**(params.get("release") or {}), "select": "all"})
    params["privacy"].update(internal_release=True, noise_key_file=str(key))
    params["dataset"]["noise_seed"] = 5
    for i, name in enumerate(GENERATORS):
        params[name] = {**(params.get(name) or {}), **SMALL[name], "noise_seed": 11 + i}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root, params["dataset"]["name"]


def run(root: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(root), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("SYNTHRELEASE_NOISE_KEY", None)
    out = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="the checkout to run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, dataset = scratch_project(args.root.resolve(), Path(tmp))
        for stage in ("validate", "prepare", "budget"):
            run(root, "-m", "flows.cli", "stage", stage)
        for name in GENERATORS:
            run(root, "-m", "flows.cli", "stage", "train", "--generator", name)
            print(f"{name:<15} {run(root, '-c', SAMPLE, name, dataset)}", flush=True)


if __name__ == "__main__":
    main()
