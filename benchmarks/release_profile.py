"""Per-stage wall time of the default release (issue 20): `dvc repro` of a fresh copy of the project.

The project's tracked and untracked-but-not-ignored files are copied into a temporary directory (no data/,
models/, ledger/, reports/ or releases/: a first release on a fresh ledger), made a git repository, and
`dvc repro` runs there with the copy's own code first on PYTHONPATH (the editable install would otherwise
import the working tree's). Each stage's time is from its "Running stage" line to the next stage's (or the
end); the table prints per stage, per stage family (train@*, evaluate@*, ...) and in total, with the load
average before and after, since a busy machine slows every stage.

    python -m benchmarks.release_profile                   # the default release (params.yaml)
    python -m benchmarks.release_profile --json out.json   # also the numbers as JSON
    python -m benchmarks.release_profile --keep /tmp/rp    # keep the copy (rerun a stage: cd /tmp/rp; dvc repro ...)
    python -m benchmarks.release_profile --reuse /tmp/rp --keep /tmp/rp2   # after a code change: a copy of that
        # kept run (models, ledger, DVC cache) with the current code over it; only the stages the change touches run
    python -m benchmarks.release_profile --reuse /tmp/rp --only tasks/evaluate.py pipelines/evaluation -- -s
    evaluate@mst
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipelines.config import resolved_text

ROOT = Path(__file__).resolve().parents[1]
STAGE_LINE = re.compile(r"Running stage '([^']+)'")


def copy_project(dest: Path, only: list[str] | None = None) -> None:
    """Tracked and untracked-not-ignored files of ROOT (or of the paths `only`) into `dest` (the release's inputs
    and code, no outputs)."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *(only or [])],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    if not (dest / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True)


def timed_repro(workdir: Path, extra: list[str]) -> tuple[list[tuple[str, float]], float, int]:
    """Runs `dvc repro` in `workdir`, echoing its output; returns [(stage, seconds)], total seconds, exit code."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{workdir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PREFECT_HOME": str(workdir / ".prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "GX_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "DVC_NO_ANALYTICS": "1",
    }
    start = time.perf_counter()
    marks: list[tuple[str, float]] = []
    proc = subprocess.Popen(
        ["dvc", "repro", *extra],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        match = STAGE_LINE.search(line)
        if match:
            marks.append((match.group(1), time.perf_counter()))
    rc = proc.wait()
    end = time.perf_counter()
    stages = [(name, (marks[i + 1][1] if i + 1 < len(marks) else end) - t) for i, (name, t) in enumerate(marks)]
    return stages, end - start, rc


def family(stage: str) -> str:
    return stage.split("@")[0]


def table(stages: list[tuple[str, float]], total: float) -> str:
    lines = [f"{'stage':<28}{'seconds':>10}", "-" * 38]
    lines += [f"{name:<28}{sec:>10.1f}" for name, sec in stages]
    sums: dict[str, float] = {}
    for name, sec in stages:
        sums[family(name)] = sums.get(family(name), 0.0) + sec
    lines += ["-" * 38] + [f"{name + ' (all)':<28}{sec:>10.1f}" for name, sec in sums.items()]
    lines += ["-" * 38, f"{'total (dvc repro)':<28}{total:>10.1f}"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--params", type=Path, help="a params file (whole or override) resolved over the copy's params.yaml"
    )
    parser.add_argument("--keep", type=Path, help="run in this (new or empty) directory and keep it")
    parser.add_argument("--reuse", type=Path, help="start from a copy of this kept run (see the docstring)")
    parser.add_argument(
        "--only",
        nargs="+",
        help="with --reuse: copy only these project paths over it (one "
        "change measured alone while others edit the tree)",
    )
    parser.add_argument("--json", type=Path, help="write the per-stage seconds here")
    parser.add_argument("repro_args", nargs="*", help="extra `dvc repro` arguments (after --)")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="release_profile_"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.reuse:
            shutil.copytree(args.reuse, workdir, symlinks=True, dirs_exist_ok=True)
        copy_project(workdir, args.only)
        if args.params:
            (workdir / "params.yaml").write_text(resolved_text(args.params))  # an override file made whole
        load_before = os.getloadavg()
        stages, total, rc = timed_repro(workdir, args.repro_args)
        load_after = os.getloadavg()
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{os.cpu_count()} CPUs; load average (1, 5, 15 min) before {load_before}, after {load_after}")
    print(table(stages, total))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "stages": dict(stages),
                    "total_s": total,
                    "exit_code": rc,
                    "cpus": os.cpu_count(),
                    "load_before": load_before,
                    "load_after": load_after,
                },
                indent=2,
            )
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
