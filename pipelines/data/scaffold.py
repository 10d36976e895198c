"""`synthrelease init`: a schema and a params file for a steward's own table, from its header alone.

The schema (``schemas/<name>.yaml``) has one entry per column of the header with ``kind``, bounds and
categories set to ``schema.PLACEHOLDER``: the steward fills them from the table's public documentation
(privacy rule 1: never from the rows), and ``load_schema`` refuses the schema while one is left. No data cell
is read (``header.read_header``), so nothing in the written files depends on the rows.

The params file (``params/<name>.yaml``) is the project's params.yaml, section for section and with its
comments, except the ``dataset:`` section (this table, ``columns: schema``) and the generators whose
sections name columns of the bundled table (``COLUMN_CHOICES``): they are left out until the steward
chooses those columns.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from pipelines.config import EXTENDS
from pipelines.data.header import read_header
from pipelines.data.schema import DISCOVER, KINDS, PLACEHOLDER
from pipelines.errors import InputError

# generators whose params.yaml section names columns of the bundled table, and what the steward must choose
COLUMN_CHOICES = {
    "ppem": "ppem.protected (numeric columns whose marginal must not be reproduced)",
    "iw_mmd_gan": "iw_mmd_gan.weights (the column to rebalance and its documented class shares)",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_TOP_KEY = re.compile(r"([A-Za-z_]\w*):")


@dataclass(frozen=True)
class Scaffold:
    """The two files `init` writes (paths relative to the project root) and their text."""

    schema_path: Path
    schema_text: str
    params_path: Path
    params_text: str


def scaffold(data: str | Path, name: str, root: Path, template: Path, discover: bool = False) -> Scaffold:
    """Build (not write) the schema and params file for table `data` as data set `name`; `template` is the
    params file whose sections are copied (the project's params.yaml); `discover`: every bound and category list
    starts as `discover` (found under DP where the documentation is silent) instead of PLACEHOLDER."""
    if not _NAME.fullmatch(name):
        raise InputError(
            f"data set name {name!r} is not usable in file names.",
            file=str(data),
            fix="pick a --name of letters, digits, '_' and '-', starting with a letter or digit.",
        )
    columns = read_header(data)
    source = _source(Path(data), root)
    try:
        template_text = template.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(
            f"cannot read the params template ({e.strerror}).",
            file=str(template),
            fix="run from the project root, or pass --params PATH of a release configuration.",
        ) from e
    return Scaffold(
        Path("schemas") / f"{name}.yaml",
        schema_text(name, columns, source, discover),
        Path("params") / f"{name}.yaml",
        params_text(template_text, name, source, str(template)),
    )


def write(files: Scaffold, root: Path, force: bool = False) -> list[Path]:
    """Write both files under `root`; without `force` an existing file is refused before either is written.
    A failure writing the second removes the first (no partial output)."""
    targets = [(root / files.schema_path, files.schema_text), (root / files.params_path, files.params_text)]
    if not force:
        for path, _ in targets:
            if path.exists():
                raise InputError(
                    "exists already; init does not overwrite it.",
                    file=str(path),
                    fix="pass --force to overwrite it (and its partner file), or pick another --name.",
                )
    written: list[Path] = []
    try:
        for path, text in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w" if force else "x", encoding="utf-8") as f:
                f.write(text)
            written.append(path)
    except BaseException:
        for path in written:
            os.unlink(path)
        raise
    return written


def schema_text(name: str, columns: list[str], source: str, discover: bool = False) -> str:
    """The schema of `columns` with every documented fact a PLACEHOLDER (with `discover`, the bounds and category
    lists DISCOVER), and comments saying what goes where."""
    domain = DISCOVER if discover else PLACEHOLDER
    entries = "".join(
        f"  {_key(c)}: {{kind: {PLACEHOLDER}, lower: {domain}, upper: {domain}, categories: {domain}}}\n"
        for c in columns
    )
    return f"""\
# Public schema of '{name}', written by `synthrelease init` from the header of {source} (no cell was read).
#
# Replace every {PLACEHOLDER} with a fact from the table's PUBLIC documentation (a codebook, a data dictionary,
# a published paper), never from the rows: a bound or category list computed from the data is itself a
# release of the data, outside any privacy guarantee. Until every {PLACEHOLDER} is gone, the pipeline stops at
# its first stage with an error naming the column.
#   kind: one of {", ".join(KINDS)}.
#     continuous / integer: keep lower and upper (the documented range), delete categories.
#     categorical / binary: keep categories (every documented value; binary: exactly two), delete lower and upper.
#     continuous / integer, optional: step (the documented granularity, e.g. step: 0.01 for cents, or step:
#       discover) and rounding: discover (how often the values are whole thousands and the like: with a step).
#   Where the documentation gives no bound or lists no categories, write `discover` (`synthrelease init
#     --discover` writes it everywhere): the discover stage finds it under DP (privacy.discovery_epsilon, charged
#     once; categories too rare to find are released as "(other)"). Keep documented values where there are any.
#   A column that must not be released (a direct identifier, a record id, free text): delete its entry.
#   params/{name}.yaml reads only the columns listed here (dataset.columns: schema); the validation report
#   names the others, never their values.
name: {name}
# description: what the table holds, in a sentence or two
source:
  documentation: {PLACEHOLDER}   # where the bounds and categories below come from (URL, document, version)
# target: <column>                # optional: the column classifiers predict (utility metrics, train-on-synthetic)
# protected: [<column>, ...]      # optional: fairness attributes (PPEM's default protected columns)
#
# rows (optional): the row count of the whole table (train + holdout), ONLY when it is published, with where:
#   rows: {{count: 178, source: "<documentation>: Number of Instances: 178"}}
# Without it, prepare releases a noisy count instead (Laplace noise, privacy.row_count_epsilon of the budget,
# recorded in the ledger); with it, prepare checks it against such a noisy count and stops when they disagree.
# A count taken from the file itself is not public: do not write it here.
on_invalid: clip   # out-of-domain values and nulls: numeric columns are clipped to their bounds, categorical and
                   # binary ones drop the row (drop: drop rows everywhere; fatal: stop, internal releases
                   # only). A column's own on_invalid: drop | fatal (clip: numeric only) overrides it; the counts
                   # are in reports/<name>/validation.json. A column the documentation says
                   # may be empty: add `missing: allowed` (its nulls are modelled and released as nulls).
columns:
{entries}"""


def params_text(template: str, name: str, source: str, template_label: str) -> str:
    """`template` (a params file's text) with this table's dataset section, without the generators of
    COLUMN_CHOICES, every other section and comment as it is."""
    blocks = _top_level_blocks(template)
    try:
        parsed = yaml.safe_load(template) or {}
        if EXTENDS in parsed:
            raise InputError(
                f"an override file ('{EXTENDS}: {parsed[EXTENDS]}') is not a template: init copies a "
                "whole configuration, section by section.",
                file=template_label,
                fix="pass --params params.yaml, or write the whole file first with `synthrelease "
                f"--params {template_label} resolve --out whole.yaml`.",
            )
        holdout = parsed["dataset"]["holdout_fraction"]
        dropped = parsed["dataset"].get("max_dropped_fraction")
        generators = [g for g in parsed["generators"] if g not in COLUMN_CHOICES]
    except (yaml.YAMLError, KeyError, TypeError) as e:
        raise InputError(
            f"not a release configuration with dataset.holdout_fraction and generators ({e}).",
            file=template_label,
            fix="pass --params PATH of a release configuration (the project's params.yaml).",
        ) from e
    left_out = [g for g in parsed["generators"] if g in COLUMN_CHOICES]
    out = [
        f"# Release configuration of '{name}', written by `synthrelease init` from {template_label}: every\n"
        "# section as there but dataset and generators. Check the schema against the table, then release:\n"
        f"#   synthrelease --params params/{name}.yaml stage validate\n"
        f"#   synthrelease --params params/{name}.yaml run\n"
        f"#   (or: cp params/{name}.yaml params.yaml && dvc repro)\n"
    ]
    for key, text in blocks:
        if key == "dataset":
            out.append(_dataset_block(name, source, holdout, dropped) + _trailing_blank(text))
        elif key == "generators":
            note = "".join(
                f"# {g} is left out: it needs {COLUMN_CHOICES[g]};\n#   add it, with its "
                f"'{g}:' section from {template_label}, once chosen.\n"
                for g in left_out
            )
            out.append(f"{note}generators: [{', '.join(generators)}]\n" + _trailing_blank(text))
        elif key not in COLUMN_CHOICES:
            out.append(text)
    return "".join(out)


def _dataset_block(name: str, source: str, holdout: object, dropped: object = None) -> str:
    """The dataset section: this table's name and source, the template's holdout fraction and (when it has one)
    its max_dropped_fraction, shown so that a steward sees the row-loss limit prepare's DP test enforces."""
    limit = (
        ""
        if dropped is None
        else (
            f"  max_dropped_fraction: {dropped}        # prepare's DP row-loss test stops when policies drop or clip "
            f"more of the rows read\n"
        )
    )
    return (
        f"dataset:\n"
        f"  name: {name}{' ' * max(1, 28 - len(name))}# schemas/{name}.yaml is the public schema\n"
        f"  source: {_scalar(source)}\n"
        f"  holdout_fraction: {holdout}             # each row's side: HMAC(secret split key, row) < this\n"
        f"{limit}"
        f"  columns: schema                   # read only the schema's columns; the table's others are named\n"
        f"                                    # in reports/{name}/validation.json, never their values (strict: "
        f"refuse them)\n"
    )


def _top_level_blocks(text: str) -> list[tuple[str, str]]:
    """(key, text) of each top-level `key:` line, the comment lines at column 0 right above it and the lines
    under it; the lines before the first key's comments (the template's own header) are dropped."""
    blocks: list[list] = [[None, []]]
    for line in text.splitlines(keepends=True):
        m = _TOP_KEY.match(line)
        if m:
            above = blocks[-1][1]
            n = len(above) - next((i for i, x in enumerate(reversed(above)) if not x.startswith("#")), len(above))
            blocks[-1][1], lead = above[:n], above[n:]
            blocks.append([m.group(1), lead + [line]])
        else:
            blocks[-1][1].append(line)
    return [(key, "".join(lines)) for key, lines in blocks if key is not None]


def _trailing_blank(block: str) -> str:
    return "\n" if block.endswith("\n\n") else ""


def _source(data: Path, root: Path) -> str:
    """The table's path as params writes it: relative to the project root when inside it, else absolute."""
    path = data.resolve()
    return str(path.relative_to(root.resolve())) if path.is_relative_to(root.resolve()) else str(path)


def _key(column: str) -> str:
    """`column` as a YAML mapping key (quoted where YAML would read it as something else)."""
    return yaml.safe_dump({column: 0}, width=1 << 20, allow_unicode=True).rstrip("\n").removesuffix(": 0")


def _scalar(value: str) -> str:
    return yaml.safe_dump(value, width=1 << 20, allow_unicode=True).removesuffix("\n...\n").rstrip("\n")
