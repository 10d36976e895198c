"""The release configuration (params.yaml), checked once by one typed model, and where each stage's
artefacts live.

Every section is one pydantic class (pipelines/parameters.py): each field declares its type, default, range and
description, unknown keys are refused, and the rules between keys are the class's validators; a generator's
section is its parameters module's `Params`. docs/parameters.md is written from these declarations
(`synthrelease parameters`). Every problem, in any section, is one `InputError` naming the file, the key path,
the problem and the fix. `load_params` returns the typed `Config` every stage reads; params.yaml need hold only
what differs from the defaults.
"""

from __future__ import annotations

import copy
import difflib
import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Mapping, Sequence, get_args

import yaml
from pydantic import (
    BeforeValidator,
    Field,
    StrictStr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from pipelines.data.header import ColumnMode
from pipelines.errors import InputError, ParamError
from pipelines.io import canonical_json, sha256_text
from pipelines.parameters import (
    EPSILON,
    Epsilon,
    GeneratorParams,
    OptionalEpsilon,
    Real,
    Section,
    epsilon_number,
    rule_broken,
    rule_key,
)
from pipelines.ranges import (
    BATCH,
    DRAWS,
    EPOCHS,
    MAX_BINS,
    MAX_DRAWS,
    NOISE_SEED,
    OPEN_FRACTION,
    POSITIVE,
    ROWS_CAP,
    SEED,
    STEPS,
    UNIT,
    WIDTHS,
    OutOfRange,
    ints,
    nullable,
    reals,
)

PARAMS_FILE = "params.yaml"
EXTENDS = "extends"  # an override file's base (`read_params`)
# keys that were accepted once and are refused now with their own reason: (section kind, key) -> (problem, fix)
RETIRED = {
    ("dataset", "split_seed"): (
        "'dataset.split_seed' was removed: the train/holdout split is now a keyed hash of each row's content with "
        "a secret key (so adding a row moves no other row, and nobody can recompute the split from a public seed).",
        "delete 'split_seed:' under 'dataset:' (docs/architecture.md, 'Neighbouring relation').",
    ),
    ("generator", "delta"): (
        "a generator has no δ of its own: privacy.delta is the δ of every ε reported on the data set, and the "
        "train stage plans every generator at it (a per-generator 'delta' would be silently ignored).",
        "delete 'delta:' under '{section}:' and set 'privacy.delta' instead.",
    ),
}


def epsilon_value(value: Any) -> float:
    """ε as a float: a positive number or 'inf' (EPSILON); else OutOfRange, a ValueError."""
    return EPSILON.checked(epsilon_number(value))


# the noisy training row count's ε, finite, or null (no noisy count: the documented count trusted unchecked)
RowCountEpsilon = Annotated[
    Any,
    BeforeValidator(epsilon_number),
    reals(
        gt=0,
        nullable=True,
        why="the training row count is released with Laplace noise; null: a documented count trusted unchecked",
    ),
]
# the DP row-loss test's ε, finite (whether a release happens at all is always decided under DP)
RowLossEpsilon = Annotated[
    Any,
    BeforeValidator(epsilon_number),
    reals(gt=0, why="whether the release goes on is published, so the row-loss test is always a DP mechanism"),
]
# the discovery's ε, finite (a domain taken from the rows is private unless a DP mechanism released it)
DiscoveryEpsilon = Annotated[
    Any,
    BeforeValidator(epsilon_number),
    reals(gt=0, why="a domain read from the rows is published only through a DP mechanism"),
]
RowsCap = Annotated[int | None, nullable(ROWS_CAP)]  # a cap on rows read (null: no cap; a cap above the table's
# rows is the same, pipelines/ranges.py)


class Dataset(Section):
    """`dataset:`: the table and how it is split."""

    name: StrictStr = Field(description="the data set's name: schemas/<name>.yaml, and every artefact's folder")
    source: StrictStr = Field(description="the table's file (CSV or Parquet)")
    holdout_fraction: Annotated[
        Real,
        reals(
            ge=0.05,
            le=0.95,
            why="the DP release test weighs the two sides by the fraction as a ratio of denominator at most 20",
        ),
    ] = Field(description="share of the privacy units held out for evaluation and the release test")
    columns: ColumnMode = Field(
        "strict",
        description="strict: the table has exactly the schema's columns; "
        "schema: read only the schema's columns of a wider table",
    )
    max_dropped_fraction: Annotated[Real, UNIT] = Field(
        0.02, description="prepare's DP row-loss test stops when policies dropped or clipped more of the rows read"
    )
    noise_seed: Annotated[int | None, NOISE_SEED] = Field(
        None, description="fixed noise of the noisy row count: internal releases only"
    )


class Privacy(Section):
    """`privacy:`: the guarantee, the budgets and the ledger."""

    delta: Annotated[Real, reals(gt=0, lt=1, why="well below 1/number of rows, e.g. 1.0e-5")] = Field(
        description="δ of every ε reported on the data set"
    )
    lifetime_epsilon: Epsilon = Field(description="the data set's (population's) whole budget over all releases")
    release_epsilon: Epsilon = Field(1.0, description="ε of one release run, all generators and weights composed (PLD)")
    row_count_epsilon: RowCountEpsilon = Field(
        0.05, description="the noisy training row count n̂, or the documented count's check"
    )
    row_loss_epsilon: RowLossEpsilon = Field(0.05, description="the DP test of the rows validation lost")
    discovery_epsilon: DiscoveryEpsilon = Field(
        0.1, description="the schema's `discover` parts, all of them (spent once; later releases reuse them)"
    )
    ledger: StrictStr = Field(description="the privacy ledger: a SQLite file or a PostgreSQL URL")
    warn_releases_left: Annotated[int, ints(0, 20)] = Field(
        3, description="the budget stage warns when fewer further releases than this fit the lifetime budget"
    )
    internal_release: bool = Field(
        False, description="true: a release that never leaves the organisation (allows noise seeds and ε = inf)"
    )
    noise_key_file: StrictStr | None = Field(
        None, description="file of the steward's secret noise key (else SYNTHRELEASE_NOISE_KEY or OS entropy)"
    )


WORKERS = ints(1, 1024)  # threads or processes: a local Dask cluster starts every one of its workers


class Orchestration(Section):
    """`orchestration:`: how the Prefect flow runs the stages (flows/runners.py)."""

    task_runner: Literal["threads", "dask"] = Field("threads", description="the Prefect task runner")
    max_workers: Annotated[int, WORKERS] = Field(4, description="threads of the threads runner")
    dask_address: StrictStr | None = Field(None, description="a running Dask scheduler; null: a local cluster")
    dask_workers: Annotated[int, WORKERS] = Field(2, description="worker processes of the local cluster")
    dask_memory_limit: StrictStr = Field(
        "auto", description="per worker process of the local cluster (Dask restarts one above it)"
    )
    dask_blocksize: StrictStr = Field(
        "32MiB", description="bytes of the source per part read by the out-of-core validate/prepare"
    )

    @field_validator("dask_memory_limit", "dask_blocksize")
    @classmethod
    def _bytes(cls, value: str, info: ValidationInfo) -> str:
        """A byte count of at least 1MiB (Dask's `parse_bytes`); the memory limit may be 'auto' (Dask's: the
        machine's memory shared by the workers)."""
        assert info.field_name is not None  # a field validator's info names its field
        default = cls.model_fields[info.field_name].default
        if value in (default, "auto" if info.field_name == "dask_memory_limit" else None):
            return value  # dask.utils is slow to import, and every stage loads the configuration
        from dask.utils import parse_bytes

        try:
            size = parse_bytes(value)
        except ValueError:
            size = 0
        if size < 1 << 20:
            raise ParamError(
                info.field_name,
                f"must be a byte count of at least 1MiB, got {value!r}",
                f"e.g. '{info.field_name}: {default}'.",
            )
        return value


class Metrics(Section):
    """DP-auto-GAN's metrics (pipelines/evaluation/unsupervised.py), the utility classifiers' and the verdict's
    row caps, and the k-way marginal."""

    read_max_rows: RowsCap = Field(
        1_000_000, description="rows of each table the evaluation reads at all (a seeded sample above it)"
    )
    max_rows: RowsCap = Field(10000, description="rows of R, S and T (each, seeded) for the model-based metrics")
    utility_max_rows: RowsCap = Field(
        50000, description="rows of each table the utility classifiers and the verdict fit or score (seeded)"
    )
    ot_max_rows: RowsCap = Field(2000, description="rows per side for exact optimal transport (W2)")
    kway: Annotated[int, ints(1, 5, why="NIST's k is 3")] = Field(3, description="k of the k-way marginal")
    kway_subsets: Annotated[int, DRAWS] = Field(100, description="random column k-subsets")
    kway_bins: Annotated[int, ints(1, MAX_BINS)] = Field(
        10, description="equal-width bins per numeric column over its schema bounds"
    )


class Scorecard(Section):
    """The scorecard's knobs (pipelines/evaluation/scorecard.py)."""

    mmd_max_rows: RowsCap = Field(1000, description="rows per side of the MMD Gram matrix (seeded)")
    mmd_permutations: Annotated[int, DRAWS] = Field(200, description="permutations of the MMD p-value")
    detection_max_rows: RowsCap = Field(
        2000, description="rows per class of the real-vs-synthetic detection classifier"
    )
    classifier_max_rows: RowsCap = Field(5000, description="training rows (each table) of the 10 TSTR/TRTR classifiers")
    range_queries: Annotated[int, DRAWS] = Field(1000, description="random range queries (PEARL I.1)")
    range_query_attributes: Annotated[int, ints(1)] = Field(3, description="attributes per range query")


class Attacks(Section):
    """`evaluate.attacks:` (pipelines/evaluation/attacks/suite.py; every random choice seeded by evaluate.seed)."""

    max_rows: Annotated[int, ROWS_CAP] = Field(
        2000,
        description="members and non-members per membership/inference attack (each), and the disclosure sets' size",
    )
    pool_max_rows: Annotated[int, ROWS_CAP] = Field(
        50000,
        description="synthetic rows the attacks search, training rows the copies' DCR searches, holdout "
        "reference rows (seeded samples above it)",
    )
    bootstrap: Annotated[int, ints(20, MAX_DRAWS)] = Field(
        200, description="bootstrap resamples of the membership AUC interval"
    )
    n_attacks: Annotated[int, DRAWS] = Field(
        500, description="targets (linkability, inference) or queries (singling out) per attack"
    )
    singling_out_columns: Annotated[int, ints(1)] = Field(3, description="predicates per multivariate query")
    neighbours: Annotated[int, ints(1)] = Field(1, description="linkability: nearest synthetic rows compared")
    secret: StrictStr | None = Field(None, description="the secret column; null: the schema's target")
    known: list[StrictStr] | None = Field(None, description="the attacker's columns; null: every other column")
    linkability_columns: list[list[StrictStr]] | None = Field(
        None, description="[[A...], [B...]]; null: a seeded random halving of the columns"
    )
    tolerance: Annotated[Real, OPEN_FRACTION] = Field(
        0.05, description="a numeric guess is correct within this share of the schema range"
    )
    disclosure_fraction: Annotated[Real, OPEN_FRACTION] = Field(
        0.05, description="set size as a share of the training rows (thesis §4.3)"
    )
    near_duplicate_distance: Annotated[Real, OPEN_FRACTION] = Field(
        0.01, description="Gower DCR at or below which a synthetic row is a near duplicate"
    )


class Evaluate(Metrics, Scorecard):
    """`evaluate:`: what evaluate@gen measures (steward-side; nothing here spends budget)."""

    seed: Annotated[int, SEED] = Field(0, description="public seed of every subsample and model of the evaluation")
    n_samples: Annotated[int | None, ints(1, 10**9, nullable=True)] = Field(
        None, description="synthetic rows sampled and published; null: as many as the public training row count"
    )
    attacks: Annotated[Attacks, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=Attacks, description="the privacy-risk attacks"
    )


class RiskGates(Section):
    """`risk_gates:` (pipelines/gates/risk.py): lower bounds of the attacks' risks."""

    membership_auc_max: Annotated[Real, UNIT] = Field(
        0.6, description="lower bound of the DOMIAS and DCR membership AUCs"
    )
    exact_match_excess_max: Annotated[Real, UNIT] = Field(
        0.0, description="lower bound of the exact-copy rate of S beyond the holdout's"
    )
    singling_out_risk_max: Annotated[Real, UNIT] = Field(0.1, description="anonymeter singling-out risk (0: none)")
    linkability_risk_max: Annotated[Real, UNIT] = Field(0.1, description="anonymeter linkability risk")
    inference_risk_max: Annotated[Real, UNIT] = Field(0.1, description="anonymeter inference risk")
    confidence: Annotated[Real, OPEN_FRACTION] = Field(
        0.95, description="family-wise, over all interval tests of one release"
    )


UTILITY_WORDS = ("inverted", "weak")  # the verdict words `utility_gate:` sets a policy for


class UtilityGate(Section):
    """`utility_gate:` (pipelines/gates/utility.py): a policy for each verdict word in UTILITY_WORDS."""

    inverted: Literal["refuse", "label"] = Field(
        "refuse", description="a table that predicts the opposite of the truth"
    )
    weak: Literal["refuse", "label"] = Field("label", description="a table no better than independent marginals")
    confidence: Annotated[Real, OPEN_FRACTION] = Field(
        0.95, description="of the inverted bound; family-wise over the 'fit' claims"
    )
    bootstrap: Annotated[int, ints(20, MAX_DRAWS)] = Field(
        200, description="resamples of the 2-way TV difference's standard error"
    )
    baseline_draws: Annotated[int, ints(2, 100)] = Field(
        5, description="independent-marginals tables whose AUROC spread is the task's noise floor"
    )
    association_tolerance: Annotated[Real, reals(ge=0, lt=1, why="a correlation")] = Field(
        0.1,
        description="a feature is distorted when its association with the target is further from the real one "
        "than no association, and by more than this correlation (Cohen's 'small')",
    )


SELECTION = "private_selection"  # the generator `select: private` trains (pipelines/generators/private_selection.py)


class Release(Section):
    """`release:` (pipelines/selection.py): which of `generators` one release run trains and publishes."""

    select: Literal["auto", "all", "private"] = Field(
        "auto",
        description="auto: the public rule picks one generator, which gets the whole release ε; all: every "
        "one; private: the DP selection among the others",
    )
    test_epsilon: Annotated[
        Real, reals(ge=0.001, why="below it the test's noise, of scale at least 1,000 rows, decides alone")
    ] = Field(0.1, description="ε of the DP release test of each published table (pinned)")
    test_excess_max: Annotated[Real, UNIT] = Field(
        0.05, description="share of training rows near the table, beyond the holdout's, that the test tolerates"
    )
    test_confidence: Annotated[
        Real, reals(ge=0.5, lt=1, why="a test that refuses most fresh tables is not a release test")
    ] = Field(0.99, description="a table within test_excess_max passes with at least this probability")
    non_dp_gates: Literal["advise", "refuse"] = Field(
        "advise",
        description="advise: the row-reading gates go to the steward report only (every public bit DP); "
        "refuse: they also block publication, and the manifest lists their non-DP bits",
    )


SELECTED: Final = "selected"  # weights.generators: the generators the release selects (auto: its one table)
WeightEstimatorName = Literal["logreg", "mlp", "beta_noised", "output_lapl", "output_norm", "priv_mlp", "discriminator"]
WEIGHT_ESTIMATORS = get_args(WeightEstimatorName)


class WeightEstimator(Section):
    """The weight estimators' knobs (pipelines/weights/estimators.py). Logistic: the paper's λ = 0.1; MLP: two ReLU
    layers (§4) trained by SGD with lots of L = batch_size rows in expectation."""

    l2: Annotated[Real, POSITIVE] = Field(0.1, description="λ of J_D (logistic estimators)")
    rho_max: Annotated[Real, reals(gt=0, lt=1, why="Corollary 1 needs ρ < 1")] = Field(
        0.5, description="output_lapl: largest Laplace scale ρ (< 1/2 keeps the variance finite)"
    )
    gamma_max: Annotated[Real, reals(gt=0, le=10, why="the weights' noise e^ζ' has variance e^{γ²} − 1")] = Field(
        1.0, description="output_norm: largest Gaussian std γ"
    )
    hidden: Annotated[list[int], WIDTHS] = Field([32, 32], description="mlp / priv_mlp widths")
    epochs: Annotated[int, EPOCHS] = Field(
        3, description="passes over N_D + N_G in expectation: T = ceil(epochs / q) (docs/importance-weights.md)"
    )
    batch_size: Annotated[int, BATCH] = Field(64, description="L: expected lot size, q = L / (N_D + N_G)")
    max_steps: Annotated[int | None, nullable(STEPS)] = Field(
        5000, description="T <= this (null: no cap), so a large table's weights cost what a small one's do"
    )
    clip_norm: Annotated[Real, POSITIVE] = Field(1.0, description="C")
    lr: Annotated[Real, POSITIVE] = Field(0.05, description="SGD learning rate")
    momentum: Annotated[Real, reals(ge=0, lt=1)] = Field(0.9, description="SGD momentum")
    critic_temperature: Annotated[Real, POSITIVE] = Field(1.0, description="discriminator: w ∝ exp(D / T)")
    seed: Annotated[int, SEED] = Field(0, description="public: initialisation and the synthetic rows' lots")
    noise_seed: Annotated[int | None, NOISE_SEED] = Field(
        None, description="DP noise and the private lots: OS entropy unless set (internal releases only)"
    )


class Weights(WeightEstimator):
    """`weights:`: DP importance weights of the published table (the weight stage's keys, then the estimator's)."""

    estimator: WeightEstimatorName = Field("priv_mlp", description="the weight estimator")
    generators: Literal["selected"] | list[StrictStr] = Field(
        SELECTED, description="'selected': the published table; or a list of generators; []: none"
    )
    epsilon: OptionalEpsilon = Field(None, description="pinned ε; null: allocated from privacy.release_epsilon")
    share: Annotated[Any, POSITIVE] = Field(
        0.25, description="share of the release ε, against a generator's 1.0 (the weights refine the table)"
    )
    khat_bound: Annotated[Real, POSITIVE] = Field(0.7, description="PSIS k̂ above which the weights are withheld")
    tempering: Annotated[Real, reals(ge=0, le=1, why="1: no tempering")] = Field(
        1.0, description="exponent applied to the weights"
    )
    psis: bool = Field(True, description="Pareto-smooth the weights' tail")
    calibration: StrictStr | None = Field(None, description="a file of public calibration rows; null: none")
    analysis_max_rows: Annotated[int, ROWS_CAP] = Field(2000, description="synthetic rows the weighted analyses read")
    analysis_real_max_rows: Annotated[int, ROWS_CAP] = Field(
        50000, description="real holdout / training rows the weighted analyses read (seeded)"
    )
    prior_variance: Annotated[Real, POSITIVE] = Field(10.0, description="the Bayesian analysis' prior variance")

    @model_validator(mode="after")
    def _calibration_needs_scores(self) -> "Weights":
        """Calibration rows only for an estimator that privatises its classifier."""
        if self.calibration is not None and self.estimator in ("output_lapl", "output_norm"):
            raise ParamError(
                "calibration",
                f"needs the classifier's scores on the calibration rows; "
                f"{self.estimator} privatises only the released weights, so scoring other rows would "
                f"leak the non-private classifier",
                "set 'weights.calibration: null' or use priv_mlp, beta_noised or discriminator.",
            )
        return self


SECTIONS: dict[str, type[Section]] = {  # the sections' models, by key path
    "dataset": Dataset,
    "privacy": Privacy,
    "orchestration": Orchestration,
    "evaluate": Evaluate,
    "evaluate.attacks": Attacks,
    "risk_gates": RiskGates,
    "utility_gate": UtilityGate,
    "weights": Weights,
    "release": Release,
}


def section_models() -> dict[str, type[Section]]:
    """The models of the sections, by key path."""
    return SECTIONS


@cache
def generator_model(name: str) -> type[GeneratorParams]:
    """A registered generator's parameter class (its parameters module's `Params`; imports no torch)."""
    return importlib.import_module(generator_module(name)).Params


def fail(file: str, key: str, problem: str, fix: str) -> InputError:
    """The one error shape: file, key path, problem, fix."""
    return InputError(f"'{key}': {problem}", file=file, fix=fix)


def check(model: type[Section], raw: Any, prefix: str, file: str = PARAMS_FILE, kind: str = "") -> Section:
    """`raw` validated by `model`; the first problem becomes one InputError naming `prefix`.key."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise fail(file, prefix, f"must be a mapping of keys, got {raw!r}.", f"write '{prefix}:' as key: value lines.")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise error_of(e.errors(), model, raw, prefix, file, kind or prefix) from None


def error_of(
    errors: Sequence[Mapping[str, Any]], model: type[Section], raw: dict, prefix: str, file: str, kind: str
) -> InputError:
    """One InputError for pydantic's `errors`: unknown keys (with the closest known key), retired keys,
    missing keys, a value out of its key's Range (the range and the default named), or a wrong value (every
    alternative of a union named)."""
    first = errors[0]
    loc = key_path(model, first)
    broken = rule_broken(first)
    if broken is not None:
        key = rule_key(prefix, loc, broken)
        return fail(
            file,
            key,
            f"{broken.problem}.".replace("..", "."),
            broken.fix or f"correct '{key}' (docs/parameters.md lists every key with its default and range).",
        )
    parent = ".".join(p for p in (prefix, *loc[:-1]) if p)
    key = ".".join(p for p in (parent, loc[-1]) if p)
    if first["type"] == "extra_forbidden":
        retired = RETIRED.get((kind, loc[-1]))
        if retired and len(loc) == 1:
            problem, fix = retired
            return fail(file, key, problem, fix.format(section=prefix))
        unknown = sorted(
            key_path(model, x)[-1]
            for x in errors
            if x["type"] == "extra_forbidden" and key_path(model, x)[:-1] == loc[:-1]
        )
        known = sorted(nested_model(model, loc[:-1]).model_fields)
        close = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return fail(
            file,
            key,
            f"unknown {parent or 'top-level'} keys {unknown}.",
            f"{hint}rename or remove the unknown keys; known keys: {', '.join(known)}.",
        )
    if first["type"] == "missing":
        return fail(file, key, "missing.", f"add '{loc[-1]}:' under '{parent}:' (docs/parameters.md lists every key).")
    out_of_range = next(
        (
            x["ctx"]["error"]
            for x in errors
            if key_path(model, x) == loc and isinstance(x.get("ctx", {}).get("error"), OutOfRange)
        ),
        None,
    )
    if out_of_range is not None:
        field = nested_model(model, loc[:-1]).model_fields[loc[-1]]
        default = () if field.is_required() else (field.get_default(call_default_factory=True),)
        return fail(file, key, f"{out_of_range}, got {first['input']!r}.", out_of_range.allowed.fix(key, *default))
    msgs = dict.fromkeys(x["msg"].removeprefix("Value error, ") for x in errors if key_path(model, x) == loc)
    problem = " or ".join(msgs)
    expected = (first.get("ctx") or {}).get("expected") if first["type"] == "literal_error" else None
    what = f"one of {expected}" if expected else "a value of its type (docs/parameters.md)"
    return fail(
        file, key, f"{problem[:1].lower()}{problem[1:]}, got {first['input']!r}.", f"correct '{key}' to {what}."
    )


def key_path(model: type[Section] | None, error: Mapping[str, Any]) -> tuple[str, ...]:
    """The params.yaml keys (and list indices) of a pydantic error's location, without its union tags
    (an unknown key, the last part of an extra_forbidden location, kept)."""
    loc, keys = [str(p) for p in error["loc"]], []
    for part in loc[:-1] if error["type"] == "extra_forbidden" else loc:
        if model is not None and part in model.model_fields:
            keys.append(part)
            model = nested_section(model.model_fields[part].annotation)
        elif part.isdigit():
            keys.append(part)
    return tuple(keys + loc[-1:]) if error["type"] == "extra_forbidden" else tuple(keys)


def nested_section(annotation: Any) -> type[Section] | None:
    """The Section type inside a field's annotation (`Attacks | None`), if any."""
    return next(
        (a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, Section)), None
    )


def nested_model(model: type[Section], loc: tuple[str, ...]) -> type[Section]:
    """The model of the mapping at `loc` inside `model`."""
    for part in loc:
        inner = nested_section(model.model_fields[part].annotation)
        assert inner is not None, f"no section at {part!r}"
        model = inner
    return model


def check_pinned_or_share(section: str, raw: dict[str, Any], file: str = PARAMS_FILE) -> None:
    """A part of the release (a generator, `weights`) pins its own ε or takes a share of the release ε, not both."""
    if raw.get("epsilon") is not None and raw.get("share") is not None:
        raise fail(
            file,
            f"{section}.share",
            f"given together with '{section}.epsilon': a pinned ε keeps its value "
            f"and takes no share of privacy.release_epsilon.",
            f"remove 'share:' (keep the pinned ε) or 'epsilon:' (allocate '{section}' from the release ε).",
        )


def allocated_section(section: dict[str, Any], epsilon: float) -> dict[str, Any]:
    """A generator's section as its class takes it: ε set to the allocated (or pinned) value, `share` dropped
    (the share is the allocation's, pipelines/privacy/allocation.py)."""
    return {**{k: v for k, v in section.items() if k != "share"}, "epsilon": float(epsilon)}


def generator_params(config: "Config", name: str, epsilon: float) -> dict[str, Any]:
    """Generator `name`'s section as its class takes it at `epsilon` (`allocated_section`); the private
    selection's with its candidates (null: every other configured generator) and their own sections."""
    section = allocated_section(config.generator(name), epsilon)
    if name == SELECTION:
        candidates = section.get("candidates") or [g for g in config.generators if g != SELECTION]
        section = {**section, "candidates": list(candidates), "sections": {g: config.generator(g) for g in candidates}}
    return section


def check_generator(name: str, raw: Any, file: str = PARAMS_FILE) -> dict[str, Any]:
    """A generator's section checked by its class (`generator_model`: keys, types, ranges, the rules between keys)
    and the pinned-ε-or-share rule; returns the section as given, with a given ε and share as floats (no ε, or ε
    null: allocated from the release ε)."""
    section = check(generator_model(name), raw, name, file, kind="generator")
    check_pinned_or_share(name, raw, file)
    return {**raw, **{k: getattr(section, k) for k in ("epsilon", "share") if k in raw}}


def noise_seed_keys(params: dict[str, Any]) -> list[str]:
    """The key paths that fix DP noise to an integer (`dataset.noise_seed`, `dpwgan.noise_seed`, ...,
    `weights.noise_seed`): every section (the data set's noisy row count, each registered generator, the
    weights) whose `noise_seed` is set, in that order."""
    from pipelines.generators.names import GENERATORS

    return [
        f"{section}.noise_seed"
        for section in ("dataset", *GENERATORS, "weights")
        if isinstance(params.get(section), dict) and params[section].get("noise_seed") is not None
    ]


def check_noise_seeds(params: dict[str, Any], file: str, internal_release: bool) -> None:
    """A `noise_seed` (tests, audits) makes the DP noise a function of a number anyone who reads the configuration
    knows: it can be regenerated and subtracted. Refused anywhere unless `privacy.internal_release` is true (the
    manifest then names the sections that set it, tasks/release.py)."""
    keys = noise_seed_keys(params)
    for key in keys:
        section = key.rsplit(".", 1)[0]
        value = params[section]["noise_seed"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(
                file, key, f"must be an integer or null, got {value!r}.", f"delete 'noise_seed:' under '{section}:'."
            )
    if keys and not internal_release:
        section = keys[0].rsplit(".", 1)[0]
        also = f" (also set: {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise fail(
            file,
            keys[0],
            f"a fixed noise seed in a public release{also}: the DP noise would follow from a "
            "number anyone who reads the configuration knows, so it could be regenerated and subtracted "
            "and the release would have no privacy guarantee.",
            f"delete 'noise_seed:' under '{section}:' (and every other noise_seed). For reproducible noise, "
            "give the steward's secret key instead (environment variable SYNTHRELEASE_NOISE_KEY, or "
            "privacy.noise_key_file outside the repository); for a release that never leaves the "
            "organisation, set 'privacy.internal_release: true'.",
        )


def configured_generators(s: "Weights", generators: Sequence[str] | None, file: str) -> None:
    """`weights.generators` among the configured generators (`generators`; None: a section read alone, by the
    estimators): the one rule of a section that needs another section."""
    if generators is not None and s.generators != SELECTED and any(g not in generators for g in s.generators):
        raise fail(
            file,
            "weights.generators",
            f"must be '{SELECTED}' or a list of generators from 'generators', got {s.generators!r}.",
            f"e.g. 'generators: {SELECTED}' (the published table), [dpwgan] or [].",
        )


def section(key: str, raw: Any, generators: Sequence[str] | None = None, file: str = PARAMS_FILE) -> Any:
    """Section `key` of a params file ("release", "evaluate.attacks", ...) checked by its model (types, ranges,
    defaults filled, rules between its keys) and, for `weights`, `configured_generators`: how `parse_params` builds
    each of `Config`'s sections, and what reads one section alone (the weight estimators, the attack suite, a
    section in a test). `generators`: the configured
    generators, which `weights.generators` must name (None: not checked). One InputError naming `file`."""
    s = check(section_models()[key], raw, key, file)
    if key == "weights":
        assert isinstance(s, Weights)
        configured_generators(s, generators, file)
    return s


def generator_module(name: str) -> str:
    """The parameters module of registered generator `name` (its `Params`; imports no torch)."""
    from pipelines.generators.names import params_module

    return params_module(name)


def release_model() -> type[Section]:
    """The whole file: its sections, and a mapping for each registered generator (checked by `check_generator`)."""
    from pipelines.generators.names import GENERATORS

    models = section_models()
    fields: dict[str, Any] = dict(  # (type, default) by key; the types are built at run time
        dataset=(models["dataset"], ...),
        privacy=(models["privacy"], ...),
        device=(Literal["auto", "cpu", "cuda"], None),
        orchestration=(models["orchestration"] | None, None),
        generators=(list[StrictStr], ...),
        evaluate=(models["evaluate"] | None, None),
        risk_gates=(models["risk_gates"] | None, None),
        weights=(models["weights"] | None, None),
        utility_gate=(models["utility_gate"] | None, None),
        release=(models["release"] | None, None),
        **{g: (dict[str, Any] | None, None) for g in GENERATORS},
    )
    return create_model("ReleaseFile", __base__=Section, **fields)


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` deep-merged over `base`: a mapping merges key by key, any other value (a list, a number, null)
    replaces the base's."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def read_params(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping a params file gives, before any check: its own keys, deep-merged (`merged`) over the file its
    top-level `extends:` names (a path relative to this file's folder), recursively.

    An override file (params/*.yaml) then holds only what differs from params.yaml. The file dvc.yaml reads
    (PARAMS_FILE) must be whole: DVC tracks a stage's params by reading that file's keys, so keys inherited from
    another file would change without DVC noticing (`synthrelease --params FILE resolve` writes a whole one).
    """
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise InputError(
            "the release configuration is missing.", file=file, fix="run from the project root or pass --params PATH."
        )
    try:
        params = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML ({e}).", file=file, fix="correct the YAML syntax.") from e
    if not isinstance(params, dict):
        raise InputError("must be a mapping of sections.", file=file, fix="start from the bundled params.yaml.")
    if EXTENDS not in params:
        return params
    base = params.pop(EXTENDS)
    if path.name == PARAMS_FILE:
        raise fail(
            file,
            EXTENDS,
            f"{PARAMS_FILE} is the file dvc.yaml reads and must be whole: DVC would not see a "
            "change in the file it extends.",
            f"keep the overrides in params/NAME.yaml and run "
            f"`synthrelease --params params/NAME.yaml resolve --out {PARAMS_FILE}`.",
        )
    if not isinstance(base, str) or not base:
        raise fail(
            file,
            EXTENDS,
            f"must be the path of the params file this one overrides, got {base!r}.",
            "e.g. 'extends: ../params.yaml'.",
        )
    base_path = path.parent / base
    if base_path.resolve() in _seen + (path.resolve(),):
        raise fail(file, EXTENDS, f"'{base}' extends this file again (a circle).", "extend a whole params file.")
    return merged(read_params(base_path, _seen + (path.resolve(),)), params)


def resolved_text(path: str | Path, defaults: bool = False) -> str:
    """The whole params file an override file stands for (`read_params`), as YAML, after `load_params` has
    checked it: what `dvc repro` needs in params.yaml to run that configuration. With `defaults`, every key with
    the value the stages use (`Config.resolved`): the params stage's data/params.yaml, which dvc.yaml's stages
    track."""
    config = load_params(path)
    if defaults:
        header = (
            f"# written by `synthrelease --params {path} resolve --defaults`: every key of {path} with the "
            f"value the stages use\n# (the file's, else its default); dvc.yaml's stages track these keys.\n"
        )
        return header + yaml.safe_dump(config.resolved, sort_keys=False, allow_unicode=True, width=100)
    header = (
        f"# written by `synthrelease --params {path} resolve` from {path} and the files it extends:\n"
        f"# edit those, then resolve again, rather than this file.\n"
    )
    return header + yaml.safe_dump(read_params(path), sort_keys=False, allow_unicode=True, width=100)


PARAMETERS_PAGE = "docs/parameters.md"


def parameters_page() -> str:
    """docs/parameters.md: every key of every section and generator with its type, default, range and
    description, written from the classes' declarations (`synthrelease parameters`; a test keeps the page equal
    to this text)."""
    from pipelines.generators.names import GENERATORS
    from pipelines.parameters import Calibration, reference_table

    parts = [
        "# Parameters",
        "",
        "Every key params.yaml accepts, written from the declarations in `pipelines/config.py` and",
        "`pipelines/generators/params/` by `synthrelease parameters` (do not edit by hand). params.yaml holds",
        "only what differs from these defaults; `synthrelease resolve --defaults` prints every key with the value",
        "a release uses. A value outside its range is refused when the file is read, before any budget is spent.",
        "",
        "## Sections",
    ]
    parts += [reference_table(key, model) for key, model in SECTIONS.items()]
    parts += [
        "",
        "## Generators",
        "",
        "Each generator's section; every generator also takes the `calibration:` mapping below, whose default",
        "`share` is the generator's own (shown in its table).",
    ]
    for g in GENERATORS:
        model = generator_model(g)
        parts.append(reference_table(g, model))
        share = model.model_fields["calibration"].default.share
        parts.append(f"\n`{g}.calibration.share` defaults to {share}.")
    parts.append(reference_table("<generator>.calibration", Calibration))
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class Config:
    """The release configuration, checked once (`parse_params`): what every stage and flow reads.

    Each section is its model's instance (defaults filled, types, ranges and rules checked); a generator's
    section is the mapping its class takes (`generator`, `generator_params`). `given` is the checked mapping the
    file gave (ε parsed to floats): which keys the steward set (a generator's pinned ε, the noise seeds).
    `resolved` is every key with the value the stages use, the file's or else its default (`resolve`): the
    params stage writes it to data/params.yaml, which dvc.yaml's stages track, and the params hashes come from
    it (`params_hash`, each stage's by dvc.yaml's key paths), so writing a default out or leaving it out hashes
    the same."""

    file: str
    given: dict[str, Any]
    resolved: dict[str, Any]
    dataset: Dataset
    privacy: Privacy
    device: Literal["auto", "cpu", "cuda"]
    orchestration: Orchestration
    generators: tuple[str, ...]
    evaluate: Evaluate  # its `attacks`: Attacks
    risk_gates: RiskGates
    utility_gate: UtilityGate
    weights: Weights
    release: Release

    def generator(self, name: str) -> dict[str, Any]:
        """Generator `name`'s section as the file gave it, checked (`check_generator`; {}: not configured)."""
        return dict(self.given.get(name) or {})

    def weighted(self, selected: Sequence[str]) -> list[str]:
        """The generators whose published table gets DP importance weights: those of `selected` (the release's
        selection, pipelines/selection.py) that `weights.generators` names (`selected`: all of them)."""
        wanted = self.weights.generators
        return [g for g in selected if wanted == SELECTED or g in wanted]

    @property
    def hash(self) -> str:
        """The whole configuration's params hash (the manifest's)."""
        return params_hash(self.resolved)


def resolve(given: dict[str, Any], sections: dict[str, Section]) -> dict[str, Any]:
    """Every key of a checked configuration with the value the stages use: each section's model dumped (defaults
    filled), each generator section the file gives dumped by its class, with its ε and share as given (absent:
    null, allocated from the release ε)."""
    from pipelines.generators.names import GENERATORS

    out = {
        "dataset": sections["dataset"].model_dump(),
        "privacy": sections["privacy"].model_dump(),
        "device": given.get("device", "auto"),
        "generators": list(given["generators"]),
        **{
            k: sections[k].model_dump()
            for k in ("orchestration", "evaluate", "risk_gates", "utility_gate", "weights", "release")
        },
    }
    for g in (g for g in GENERATORS if given.get(g) is not None):
        out[g] = {
            **generator_model(g).model_validate(given[g]).model_dump(),
            "epsilon": given[g].get("epsilon"),
            "share": given[g].get("share"),
        }
    return out


def parse_params(params: dict[str, Any], file: str = PARAMS_FILE) -> Config:
    """A params mapping (`read_params`'s) checked once (module docstring): every problem one InputError naming
    `file`, before any stage runs. What needs the schema (the columns a section names) is checked by the validate
    and budget stages, before any budget is spent (tasks/common.py `check_against_schema`)."""
    params = copy.deepcopy(params)  # `given` is the Config's own
    for key in ("dataset", "privacy"):  # the sections' own key paths, not a top-level type error
        check(section_models()[key], params.get(key), key, file)
    config: Any = check(release_model(), params, "", file)  # a model built at run time (`release_model`)
    gens = params["generators"]
    if not gens:
        raise fail(file, "generators", "must be a non-empty list.", "e.g. 'generators: [dpwgan]'.")
    from pipelines.generators.names import GENERATORS

    for g in gens:
        if g not in GENERATORS:
            close = difflib.get_close_matches(g, GENERATORS, n=1)
            raise fail(
                file,
                "generators",
                f"'{g}' is not a registered generator.",
                f"{'did you mean ' + repr(close[0]) + '? ' if close else ''}use {', '.join(GENERATORS)}.",
            )
        if g not in params:
            raise fail(
                file,
                g,
                f"generator '{g}' is listed but has no '{g}:' section.",
                f"add a '{g}:' section (empty: every default, and an equal share of privacy.release_epsilon).",
            )
        params[g] = params[g] or {}
    privacy, dataset = config.privacy, config.dataset
    for g in (g for g in GENERATORS if params.get(g) is not None):
        params[g] = check_generator(g, params[g], file)
    check_pinned_or_share("weights", params.get("weights") or {}, file)
    check_noise_seeds(params, file, privacy.internal_release)
    sections = {
        key: section(key, params.get(key), gens, file)
        for key in ("orchestration", "evaluate", "risk_gates", "utility_gate", "weights", "release")
    }
    # the mapping hashed (Config.given): the file's values, ε and the dropped fraction as the floats they mean
    params["dataset"] = {**params["dataset"], "max_dropped_fraction": dataset.max_dropped_fraction}
    params["privacy"] = {
        **params["privacy"],
        **{
            k: getattr(privacy, k)
            for k in ("row_count_epsilon", "row_loss_epsilon", "lifetime_epsilon", "release_epsilon")
        },
    }
    params.setdefault("device", "auto")
    params.setdefault("evaluate", {})
    resolved = resolve(params, {"dataset": dataset, "privacy": privacy, **sections})
    return Config(
        file=file,
        given=params,
        resolved=resolved,
        dataset=dataset,
        privacy=privacy,
        device=params["device"],
        generators=tuple(gens),
        **sections,
    )


def load_params(path: str | Path = PARAMS_FILE) -> Config:
    """Read a params file (`read_params`: params.yaml, or an override file over it) and check it once
    (`parse_params`); every problem is one InputError."""
    return parse_params(read_params(path), str(path))


def params_hash(params: dict[str, Any]) -> str:
    """The hash of a params mapping (`Config.resolved`, or the part of it one stage reads)."""
    return sha256_text(canonical_json(params))


ALLOCATION_SUMMARY = "release"  # data/allocation/<ds>/release.json: the whole allocation, next to the parts'
# evaluate@gen's figures, reports/<ds>/<gen>/<name>.png (DVC plots): DP-auto-GAN §4's (pipelines/evaluation/
# unsupervised.py), then the membership attacks' ROC curves
UNSUPERVISED_PLOTS = ("dimwise_probability", "dimwise_prediction", "marginals_1way", "pca_2way")
EVALUATE_PLOTS = UNSUPERVISED_PLOTS + ("membership_roc",)


@dataclass(frozen=True)
class Paths:
    """Artefact locations for one data set (relative to the project root)."""

    dataset: str
    root: Path = Path(".")

    @property
    def schema(self) -> Path:
        return self.root / "schemas" / f"{self.dataset}.yaml"

    @property
    def discovered(self) -> Path:
        """The discover stage's output: the domain validate fills the schema's `discover` parts with."""
        return self.root / "data" / "discovered" / f"{self.dataset}.json"

    @property
    def discovery(self) -> Path:
        """The steward-side receipt of the discovery paid for (tasks/discover.py): not a DVC output, so that later
        releases reuse it instead of spending again."""
        return self.root / "data" / "discoveries" / f"{self.dataset}.json"

    @property
    def validated(self) -> Path:
        return self.root / "data" / "raw" / self.dataset / "validated.parquet"

    @property
    def validation_report(self) -> Path:
        return self.root / "reports" / self.dataset / "validation.json"

    @property
    def prepared(self) -> Path:
        return self.root / "data" / "prepared" / self.dataset

    def model(self, gen: str) -> Path:
        return self.root / "models" / self.dataset / gen

    def checks(self, gen: str) -> Path:
        return self.root / "reports" / self.dataset / gen / "checks.json"

    def metrics(self, gen: str) -> Path:
        return self.root / "reports" / self.dataset / gen / "metrics.json"

    def synthetic(self, gen: str) -> Path:
        return self.root / "data" / "synthetic" / self.dataset / f"{gen}.parquet"

    def weights(self, gen: str) -> Path:
        """weight@gen's output: the DP importance weights of the generator's synthetic rows."""
        return self.root / "data" / "weights" / self.dataset / f"{gen}.parquet"

    def weights_report(self, gen: str) -> Path:
        return self.root / "reports" / self.dataset / gen / "weights.json"

    @property
    def allocations(self) -> Path:
        """The budget stage's output: how the release ε is divided (tasks/budget.py)."""
        return self.root / "data" / "allocation" / self.dataset

    def release_test(self, gen: str) -> Path:
        """The DP release test paid for on `gen`'s table (tasks/check.py): not a DVC output, so that a re-run of
        check@gen (DVC deletes a stage's outputs first) finds the bit already paid for instead of spending again."""
        return self.root / "data" / "release_tests" / self.dataset / f"{gen}.json"

    @property
    def row_count(self) -> Path:
        """The noisy training row count prepare paid for (tasks/prepare.py), with what it was computed from: not a
        DVC output, so that a re-run of prepare on the same rows reuses it instead of spending again."""
        return self.root / "data" / "row_counts" / f"{self.dataset}.json"

    def allocation(self, part: str) -> Path:
        """One part's allocated ε (a generator, or `weights`), what train@gen / weight@gen read; part
        ALLOCATION_SUMMARY: the whole division (the manifest's)."""
        return self.allocations / f"{part}.json"

    @property
    def real_side(self) -> Path:
        """The baseline stage's output: what evaluate@gen computes from real rows alone (tasks/baseline.py);
        steward-internal, never in a release."""
        return self.root / "data" / "baseline" / self.dataset / "real_side.json"

    @property
    def releases(self) -> Path:
        return self.root / "releases" / self.dataset

    @property
    def release_index(self) -> Path:
        return self.releases / "latest.json"
