"""Per-stage wall time of one release run stage by stage on a chosen device, without DVC (issue 32: GPU timings).

The project is copied into a fresh directory (`release_profile.copy_project`: no data, models, ledger or
releases), `params.yaml` there is the resolved `--params` with `device:` set, and each stage runs as its own
process with the command dvc.yaml gives it (`synthrelease stage NAME [--generator G]`, after `synthrelease code`),
in dvc.yaml's order: validate, prepare, budget, baseline, then train / evaluate / check / weight for every
configured generator, then release. A stage's time is its process's wall time, imports included, as under
`dvc repro`. This runs where DVC is not installed (an accelerator machine): the stages are the same functions.

`--keep DIR` keeps the copy; `--reuse DIR` starts from a kept copy; `--here` runs in the project itself (a
checkout that is already a scratch copy: the accelerator machine's, which has no git); `--skip` leaves stages
out, e.g. validate where Great Expectations is not installed (the device tool carries `data/` and `reports/`):

    python -m benchmarks.stage_times --params params/adult.yaml --stages code validate --here      # here
    python -m benchmarks.stage_times --params params/adult.yaml --here --skip code validate \\
        --device cuda --json out.json                                                           # on the GPU
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.release_profile import copy_project
from pipelines.config import resolved_text

ROOT = Path(__file__).resolve().parents[1]
PER_GENERATOR = ("train", "evaluate", "check", "weight")


def stage_commands(generators: list[str]) -> list[tuple[str, list[str]]]:
    """(stage name as DVC prints it, `synthrelease` arguments) in dvc.yaml's order."""
    out = [("code", ["code"])] + [(s, ["stage", s]) for s in ("validate", "prepare", "budget", "baseline")]
    for stage in PER_GENERATOR:
        out += [(f"{stage}@{g}", ["stage", stage, "--generator", g]) for g in generators]
    return out + [("release", ["stage", "release"])]


def machine(device: str) -> dict:
    """What ran the stages: CPUs, the accelerator (when `device` is cuda) and the frameworks' versions."""
    import torch

    facts = {"device": device, "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}
    if device == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(0)
    try:
        import jax

        facts["jax"] = jax.__version__
    except ImportError:
        pass
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml", help="params file (whole or override)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="the params' `device:`")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=YAML",
        help="top-level overrides of the resolved params, e.g. 'generators=[aim]'",
    )
    parser.add_argument("--stages", nargs="+", help="run only these stages (names as DVC prints them)")
    parser.add_argument("--skip", nargs="+", default=[], help="leave these stages out")
    parser.add_argument("--keep", type=Path, help="run in this (new or empty) directory and keep it")
    parser.add_argument("--reuse", type=Path, help="start from a copy of this kept run")
    parser.add_argument("--here", action="store_true", help="run in the project itself, not in a copy")
    parser.add_argument("--json", type=Path, help="write the per-stage seconds here")
    args = parser.parse_args()
    workdir = ROOT if args.here else args.keep or Path(tempfile.mkdtemp(prefix="stage_times_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.reuse:
        shutil.copytree(args.reuse, workdir, symlinks=True, dirs_exist_ok=True)
    if not args.here:
        copy_project(workdir)
    params = yaml.safe_load(resolved_text(args.params))
    params["device"] = args.device
    for item in args.set:
        key, _, value = item.partition("=")
        params[key] = yaml.safe_load(value)
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {
        **os.environ,
        "PYTHONPATH": f"{workdir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "GX_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    times: dict[str, float] = {}
    rc = 0
    try:
        for name, argv in stage_commands(list(params["generators"])):
            if (args.stages and name not in args.stages) or name in args.skip:
                continue
            start = time.perf_counter()
            rc = subprocess.run([sys.executable, "-m", "flows.cli", *argv], cwd=workdir, env=env).returncode
            times[name] = time.perf_counter() - start
            print(f"{name:<24}{times[name]:>9.1f} s", flush=True)
            if rc:
                print(f"stage {name} failed (exit {rc})", file=sys.stderr)
                break
    finally:
        if args.keep is None and not args.here:
            shutil.rmtree(workdir, ignore_errors=True)
    total = sum(times.values())
    print(f"{'total':<24}{total:>9.1f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine(args.device),
                    "params": str(args.params),
                    "set": args.set,
                    "stages": times,
                    "total_s": total,
                    "exit_code": rc,
                },
                indent=2,
            )
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
