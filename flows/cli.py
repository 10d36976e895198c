"""`synthrelease`: the command line that dvc.yaml, the README and stewards call.

  synthrelease init --data PATH --name NAME [--force] schemas/NAME.yaml and params/NAME.yaml from the header
  synthrelease run [--params params.yaml]            the Prefect release flow
  synthrelease --params FILE resolve [--defaults] [--out PATH]  the whole params file an override file stands
                                                     for (--defaults: every key with the value a release uses)
  synthrelease parameters [--out docs/parameters.md] the parameter reference, from the declarations
  synthrelease serve [--schedules schedules.yaml]    scheduled releases against a Prefect server
  synthrelease stage NAME [--generator G]            one stage (what dvc.yaml calls)
  synthrelease code [--out data/code]                the code fingerprint of each budget-spending stage
  synthrelease ledger show [--dataset D] | verify [--expect-head [SEQ:]HASH]
  synthrelease score --synthetic PATH [--json FILE]   a published table's fidelity and utility (steward-only)

`run` and `stage release` first warn (stderr) when dvc.lock, which fingerprints the private artefacts, is tracked
by git in a repository with a remote not listed in SYNTHRELEASE_INTERNAL_REMOTES (`lock_leak_warning`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

STAGES = ("discover", "validate", "prepare", "budget", "baseline", "train", "check", "evaluate", "weight", "release")
PER_GENERATOR = ("train", "check", "evaluate", "weight")
INTERNAL_REMOTES = "SYNTHRELEASE_INTERNAL_REMOTES"  # steward-internal git remote URLs, space- or comma-separated

for _var, _value in (
    ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
    ("GX_ANALYTICS_ENABLED", "false"),
    ("DO_NOT_TRACK", "1"),
    ("DVC_NO_ANALYTICS", "1"),
    # a fresh PREFECT_HOME migrates its database on first start: 20 s is not enough on 2 cores
    ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"),
):
    os.environ.setdefault(_var, _value)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess | None:
    """`git -C root args...` (output captured), or None where git cannot run."""
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


def lock_leak_warning(root: Path) -> str | None:
    """The warning for a repository at `root` that tracks dvc.lock in git and has a git remote whose URL is not
    steward-internal (listed in the environment variable INTERNAL_REMOTES), else None. dvc.lock records the md5
    and byte size of data/raw/<ds>/validated.parquet, the train/holdout split and the other private artefacts: an
    exact fingerprint of the private table wherever the repository is pushed (docs/operations.md)."""
    tracked = _git(root, "ls-files", "--error-unmatch", "dvc.lock")
    if tracked is None or tracked.returncode != 0:
        return None
    listed = _git(root, "remote", "-v")  # "<name> <url> (fetch|push)" per line
    remotes = [line.split()[:2] for line in (listed.stdout if listed else "").splitlines() if len(line.split()) >= 2]
    internal = {u.rstrip("/") for u in re.split(r"[\s,]+", os.environ.get(INTERNAL_REMOTES, "")) if u}
    shared = sorted({name for name, url in remotes if url.rstrip("/") not in internal})  # names: a URL may hold a key
    if not shared:
        return None
    return (
        f"warning: dvc.lock is tracked by git in {root} and the repository has git remotes whose URL is not "
        f"listed as steward-internal ({', '.join(shared)}). dvc.lock records the md5 and byte size of the "
        "validated table, the train/holdout split and the other private artefacts: pushing it publishes an "
        "exact fingerprint of the private table. Only releases/ may leave the institution. Fix: push this "
        f"repository to steward-internal remotes only and list their URLs in {INTERNAL_REMOTES} (space- or "
        "comma-separated), or remove the other remote (`git remote remove <name>`); see docs/operations.md, "
        '"What stays with the steward".'
    )


def warn_if_lock_leaks(root: Path) -> None:
    """Print `lock_leak_warning` to stderr when there is one (once per `run` or `stage release`)."""
    if (warning := lock_leak_warning(root)) is not None:
        print(warning, file=sys.stderr)


def left_out_stage(name: str, params_path: str, generator: str | None) -> dict | None:
    """The outputs of a per-generator stage for a generator it does nothing for (one the budget stage did not
    select; for weight@gen also a table the release does not weight: tasks/unselected.py), written before the
    stage's task (and its heavy imports) loads; None: run the stage."""
    from pipelines.config import Paths, load_params
    from pipelines.errors import InputError

    if not generator:
        return None
    try:
        config = load_params(params_path)
        p = Paths(config.dataset.name, Path.cwd())
    except InputError:
        return None  # the task's load_params names the problem
    from tasks import unselected

    return unselected.skip(name, config, p, generator)


def run_stage(name: str, params_path: str, generator: str | None) -> dict:
    """Stage `name` (of `generator` for a per-generator stage) in its context: the checked params, the project root
    (the working directory, where dvc.yaml lives) and the run id of SYNTH_RUN_ID, if set."""
    if name in PER_GENERATOR and (skipped := left_out_stage(name, params_path, generator)) is not None:
        return skipped
    from pipelines.config import load_params

    config = load_params(params_path)
    if name in PER_GENERATOR:
        if not generator:
            raise SystemExit(f"error: stage '{name}' needs --generator (one of {config.generators})")
        if generator not in config.generators:
            raise SystemExit(f"error: generator '{generator}' is not listed in {params_path}'s 'generators'")
    import importlib

    from tasks.common import StageContext

    stage = importlib.import_module(f"tasks.{name}")  # the plain functions: no Prefect import
    return stage.run(StageContext(config, Path.cwd(), os.environ.get("SYNTH_RUN_ID")), generator)


def ledger_command(args: argparse.Namespace) -> int:
    from pipelines.config import load_params
    from tasks.common import StageContext, released_head

    ctx = StageContext(load_params(args.params), Path.cwd())
    config, led = ctx.config, ctx.ledger  # HMAC-chained rows need the steward key (env or privacy.noise_key_file)
    if args.action == "verify":
        if args.expect_head:
            seq, _, digest = args.expect_head.rpartition(":")
            expect, source = ({"seq": int(seq), "hash": digest} if seq else digest), "--expect-head"
        else:  # the head the last release recorded: rows deleted up to it are caught
            expect, source = released_head(ctx.paths)
        report = led.verify(expect_head=expect)
        print(
            json.dumps({**report, "expected_head": expect, "expected_head_from": source if expect else None}, indent=2)
        )
        return 0
    dataset = args.dataset or config.dataset.name
    delta, budget = config.privacy.delta, config.privacy.lifetime_epsilon
    for row in led.rows(dataset):
        print(
            f"{row['seq']:>5} {row['created_at']} {row['run_id']:<24} {row['stage']:<18} "
            f"{row['status']:<8} {row['event_json']}"
        )
    total = led.spent(dataset, delta)  # internal-only non-private events are listed but not charged
    print(
        f"\n{dataset}: ε spent = {total:.4g} (PLD), {led.spent_rdp(dataset, delta):.4g} (RDP) at δ = {delta:g}; "
        f"lifetime budget ε = {budget:g}; remaining ε = {max(budget - total, 0):.4g}"
    )
    return 0


def score_command(args: argparse.Namespace) -> int:
    """Score a published synthetic table against the prepared real rows as evaluate@gen does
    (pipelines/evaluation/score.py): a (figure, value) table on stdout, and the whole result in `--json` if given.
    Steward-only: it reads real rows, outside the DP guarantee."""
    from dataclasses import replace
    from pipelines.config import load_params
    from pipelines.evaluation import score
    from pipelines.evaluation.outside_dp import UNAVAILABLE
    from pipelines.errors import InputError
    from pipelines.io import write_json
    from tasks import baseline, common

    ctx = common.StageContext(load_params(args.params), Path.cwd())
    config, root, p, sch = ctx.config, ctx.root, ctx.paths, ctx.schema
    table = score.published_file(Path(args.synthetic), sch, p.dataset)
    score.check_prepared(p.prepared)
    i = baseline.inputs(config, root)  # the real rows and settings evaluate reads
    i = replace(i, **score.measured_rows(table, i.knobs["read_max_rows"]))
    try:
        cache = baseline.cached(config, root, i)
    except InputError:  # computed for another synthetic row count: each metric computes its real side itself
        cache = None
    result = score.score_published(
        table, i, {} if cache is None or UNAVAILABLE in cache else cache, baseline.READ_STREAMS["synthetic"]
    )
    rows = score.figures(result)
    width = max(len(figure) for figure, _ in rows)
    print(f"{'figure':<{width}}  value")
    for figure, value in rows:
        print(f"{figure:<{width}}  {value}")
    print(f"\n{score.STEWARD_ONLY}", file=sys.stderr)
    if args.json:
        write_json(Path(args.json), {**result, "dataset": p.dataset})
        print(f"wrote {args.json} (steward-only: keep it with the real data)", file=sys.stderr)
    return 0


def resolve_command(args: argparse.Namespace) -> int:
    """`--params`'s whole configuration (pipelines.config.resolved_text), checked first; written atomically."""
    from pipelines.config import resolved_text
    from pipelines.io import atomic_path

    text = resolved_text(args.params, defaults=args.defaults)
    if not args.out:
        print(text, end="")
        return 0
    with atomic_path(Path(args.out)) as tmp:
        tmp.write_text(text)
    print(f"wrote {args.out} from {args.params}", file=sys.stderr)
    return 0


def init_command(args: argparse.Namespace) -> int:
    """Write the schema and params file of a steward's table from its header alone (pipelines/data/scaffold.py)."""
    from pipelines.data.scaffold import scaffold, write

    root = Path.cwd()
    files = scaffold(args.data, args.name, root, Path(args.params), args.discover)
    for path in write(files, root, force=args.force):
        print(f"wrote {path.relative_to(root)}", file=sys.stderr)
    print(
        f"next: replace every FILL_IN in {files.schema_path} with the table's public documentation, then\n"
        f"  synthrelease --params {files.params_path} stage validate\n"
        f"  synthrelease --params {files.params_path} run",
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="synthrelease", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--params", default="params.yaml", help="release configuration (default: params.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    it = sub.add_parser(
        "init",
        help="write schemas/NAME.yaml and params/NAME.yaml for your own table from its "
        "header only (no cell is read); --params is the template (params.yaml)",
    )
    it.add_argument("--data", required=True, help="the table: a .csv, .csv.gz or .parquet file")
    it.add_argument("--name", required=True, help="the data set's name (schemas/NAME.yaml, params/NAME.yaml)")
    it.add_argument("--force", action="store_true", help="overwrite existing schemas/NAME.yaml and params/NAME.yaml")
    it.add_argument(
        "--discover",
        action="store_true",
        help="write `discover` for every bound and category list (found under DP where the documentation is silent)",
    )
    sub.add_parser("run", help="run the Prefect release flow (temporary local server unless PREFECT_API_URL is set)")
    sv = sub.add_parser(
        "serve",
        help="register the scheduled deployments (schedules.yaml) with the Prefect server "
        "at PREFECT_API_URL and run their flow runs",
    )
    sv.add_argument("--schedules", default="schedules.yaml", help="deployments and their schedules")
    sv.add_argument("--limit", type=int, help="at most this many concurrent flow runs")
    cd = sub.add_parser(
        "code",
        help="write the code fingerprint of every budget-spending stage (dvc.yaml's `code` "
        "stage; pipelines/fingerprint.py)",
    )
    cd.add_argument("--out", default="data/code")
    rs = sub.add_parser(
        "resolve",
        help="print (or write to --out) the whole params file that --params stands for: "
        "an override file's keys merged over the files it extends",
    )
    rs.add_argument("--out", help="write here instead (e.g. params.yaml, what dvc repro reads)")
    rs.add_argument(
        "--defaults",
        action="store_true",
        help="every key, the defaults filled in (dvc.yaml's params stage: data/params.yaml, which the stages track)",
    )
    pm = sub.add_parser(
        "parameters",
        help="write the parameter reference (every key's type, default, range and meaning) from the declarations",
    )
    pm.add_argument("--out", default="docs/parameters.md")
    st = sub.add_parser("stage", help="run one stage, as dvc.yaml does")
    st.add_argument("name", choices=STAGES)
    st.add_argument("--generator")
    lg = sub.add_parser("ledger", help="show or verify the privacy ledger")
    lg.add_argument("action", choices=("show", "verify"))
    lg.add_argument("--dataset")
    lg.add_argument(
        "--expect-head",
        help="HASH: must be the current head; SEQ:HASH: row SEQ must still have HASH "
        "(default: the ledger_head of releases/<ds>/latest.json, if any)",
    )
    steward_only = (
        "STEWARD-ONLY: score a published synthetic table (a release bundle's synthetic.parquet or its "
        "directory) against the real train and holdout rows (data/prepared/<ds>/): the fidelity and "
        "utility figures of the steward report. It reads real rows, so its output is outside the DP "
        "guarantee and never for publication"
    )
    sc = sub.add_parser("score", help=steward_only, description=steward_only + ".")
    sc.add_argument(
        "--synthetic",
        required=True,
        metavar="PATH",
        help="releases/<ds>/<id>/synthetic.parquet, its directory, or a Parquet table of the schema's declared columns",
    )
    sc.add_argument(
        "--json",
        metavar="FILE",
        help="also write the whole result here (steward-only, like the real rows); default: nothing is written",
    )
    args = parser.parse_args(argv)

    from pipelines.errors import BudgetExceededError, InputError, LedgerIntegrityError

    try:
        if args.command == "run" or (args.command == "stage" and args.name == "release"):
            warn_if_lock_leaks(Path.cwd())
        if args.command == "stage":
            result = run_stage(args.name, args.params, args.generator)
            print(f"{args.name}{'@' + args.generator if args.generator else ''}: done", file=sys.stderr)
            if args.name == "release":
                print(json.dumps(result, indent=2))
        elif args.command == "run":
            from flows.release import configured_flow

            print(json.dumps(configured_flow(args.params)(params_path=args.params), indent=2))
        elif args.command == "init":
            return init_command(args)
        elif args.command == "score":
            return score_command(args)
        elif args.command == "resolve":
            return resolve_command(args)
        elif args.command == "parameters":
            from pipelines.config import parameters_page
            from pipelines.io import atomic_path

            with atomic_path(Path(args.out)) as tmp:
                tmp.write_text(parameters_page())
            print(f"wrote {args.out}", file=sys.stderr)
        elif args.command == "code":
            from pipelines.fingerprint import write_fingerprints

            print(
                f"code: {len(write_fingerprints(Path(args.out), Path.cwd()))} fingerprints in {args.out}",
                file=sys.stderr,
            )
        elif args.command == "serve":
            from flows.deploy import serve

            serve(Path(args.schedules), Path.cwd(), limit=args.limit)
        else:
            return ledger_command(args)
    except (InputError, BudgetExceededError, LedgerIntegrityError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
