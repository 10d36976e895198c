"""The release configuration (params.yaml), checked once by one typed model, and where each stage's
artefacts live.

Every section has a pydantic model that refuses unknown keys (extra="forbid"), wrong types and values out of range:
each numeric key's Range (pipelines/ranges.py) is declared once, in a table beside the section's defaults (here, or
in the generator's parameters module next to its DEFAULTS), and the model checks it after the type. A generator's
section is checked against that generator's DEFAULTS (its keys, the type of every default that is not None, its
RANGES) and then by the generator module's own `check_params` (its rules between keys). Every problem, in any
section, is one `InputError` naming the file, the key path, the problem and the fix.
`load_params` returns the typed `Config` every stage reads: each section a model instance with its defaults filled
and its ranges checked, the generators' sections as their classes take them. The params hash comes from the mapping
the file gave (`Config.given`, the YAML values with ε parsed to floats): DVC tracks those keys, and the hashes of
unchanged inputs do not move.
"""
from __future__ import annotations

import copy
import difflib
import importlib
import math
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence, Union, get_args

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt,
                      StrictStr, ValidationError, create_model)

from pipelines.data.header import ColumnMode
from pipelines.errors import InputError, ParamError
from pipelines.generators.params.calibration import calibration_params
from pipelines.io import canonical_json, sha256_text
from pipelines.ranges import (BATCH, DRAWS, EPOCHS, MAX_BINS, MAX_DRAWS, NOISE_SEED, OPEN_FRACTION, POSITIVE,
                              ROWS_CAP, SEED, STEPS, UNIT, WIDTHS, OutOfRange, Range, ints, nullable, reals)

PARAMS_FILE = "params.yaml"
EXTENDS = "extends"  # an override file's base (`read_params`)
Number = Union[StrictInt, StrictFloat]
Real = Annotated[Number, AfterValidator(float)]  # a number, read as a float
# keys that were accepted once and are refused now with their own reason: (section kind, key) -> (problem, fix)
RETIRED = {
    ("dataset", "split_seed"): (
        "'dataset.split_seed' was removed: the train/holdout split is now a keyed hash of each row's content with "
        "a secret key (so adding a row moves no other row, and nobody can recompute the split from a public seed).",
        "delete 'split_seed:' under 'dataset:' (docs/architecture.md, 'Neighbouring relation')."),
    ("generator", "delta"): (
        "a generator has no δ of its own: privacy.delta is the δ of every ε reported on the data set, and the "
        "train stage plans every generator at it (a per-generator 'delta' would be silently ignored).",
        "delete 'delta:' under '{section}:' and set 'privacy.delta' instead."),
}


EPSILON = reals(gt=0, infinite=True)   # inf: no privacy, which the ledger gate refuses outside an internal release


def epsilon_number(value: Any) -> Any:
    """ε as params.yaml may write it: a number, or a string such as 'inf' (YAML reads `inf` and `1e-1` as strings),
    as a float; anything else as NaN, which EPSILON refuses."""
    if value is None:
        return None
    try:
        return math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return math.nan


def epsilon_value(value: Any) -> float:
    """ε as a float: a positive number or 'inf' (EPSILON); else OutOfRange, a ValueError."""
    return EPSILON.checked(epsilon_number(value))


Epsilon = Annotated[Any, BeforeValidator(epsilon_number), EPSILON]
# a part's own ε, pinned (a positive number or inf) or null/absent (allocated from privacy.release_epsilon)
OptionalEpsilon = Annotated[Any, BeforeValidator(epsilon_number), nullable(EPSILON)]
# the noisy training row count's ε, finite, or null (no noisy count: the documented count trusted unchecked)
RowCountEpsilon = Annotated[Any, BeforeValidator(epsilon_number), reals(
    gt=0, nullable=True, why="the training row count is released with Laplace noise; null: a documented count "
    "trusted unchecked")]
# the DP row-loss test's ε, finite (whether a release happens at all is always decided under DP)
RowLossEpsilon = Annotated[Any, BeforeValidator(epsilon_number), reals(
    gt=0, why="whether the release goes on is published, so the row-loss test is always a DP mechanism")]
# a part's share of the release ε (pipelines/privacy/allocation.py)
Share = Annotated[Any, POSITIVE]


class Section(BaseModel):
    """A params.yaml mapping: unknown keys refused, values as YAML gave them (strict types; a number of a float
    key read as a float), read-only once checked."""
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def section_model(name: str, defaults: dict[str, Any], ranges: dict[str, Range] | None = None,
                  **fields: Any) -> type[Section]:
    """A Section whose keys are `defaults`' keys, each defaulting to its value and typed by it, with its Range from
    `ranges` (checked after the type; a nullable Range also admits null), plus `fields` (create_model's
    (annotation, default) pairs)."""
    spec: dict[str, Any] = {k: (ranged(default_type(v), (ranges or {}).get(k)), v) for k, v in defaults.items()}
    spec.update(fields)
    with warnings.catch_warnings():  # a key named like a BaseModel attribute (mst/aim `schema`) only shadows it
        warnings.filterwarnings("ignore", message="Field name .* shadows an attribute", category=UserWarning)
        return create_model(name, __base__=Section, __module__=__name__, **spec)


def ranged(annotation: Any, allowed: Range | None) -> Any:
    """`annotation` checked by `allowed` (None: unchecked), null admitted where the Range is nullable."""
    if allowed is None:
        return annotation
    return Annotated[annotation | None if allowed.nullable and annotation is not Any else annotation, allowed]


def default_type(default: Any) -> Any:
    """The type a key's default implies: None (a cap that may be off, a column chosen later) checks nothing;
    a float default also accepts an integer, read as a float."""
    if default is None:
        return Any
    for kind, annotation in ((bool, StrictBool), (int, StrictInt), (float, Real), (str, StrictStr)):
        if isinstance(default, kind):
            return annotation
    if isinstance(default, (list, tuple)):
        return list[Any]
    if isinstance(default, dict):
        return dict[str, Any]
    return Any


class Dataset(Section):
    name: StrictStr
    source: StrictStr
    holdout_fraction: Annotated[Real, reals(ge=0.05, le=0.95, why="the DP release test weighs the two sides by "
                                                                  "the fraction as a ratio of denominator at most 20")]
    columns: ColumnMode = "strict"  # "schema": read only the schema's columns of a wider table (data/readers.py)
    # prepare's DP row-loss test stops when policies dropped or clipped more of the rows read
    max_dropped_fraction: Annotated[Real, UNIT] = 0.02
    # the noisy row count's noise: internal releases only (`noise_seed_keys`)
    noise_seed: Annotated[StrictInt | None, NOISE_SEED] = None


class Privacy(Section):
    delta: Annotated[Real, reals(gt=0, lt=1, why="well below 1/number of rows, e.g. 1.0e-5")]
    lifetime_epsilon: Epsilon
    release_epsilon: Epsilon = 1.0  # ε of one release run, all generators and weights composed (PLD)
    row_count_epsilon: RowCountEpsilon = 0.05  # noisy training row count: n̂, or the documented count's check
    row_loss_epsilon: RowLossEpsilon = 0.05  # the DP test of the rows validation lost (pipelines/privacy/row_loss.py)
    ledger: StrictStr
    # the budget stage warns when fewer further releases than this fit the lifetime budget (pipelines/privacy/runway.py)
    warn_releases_left: Annotated[StrictInt, ints(0, 20)] = 3
    internal_release: StrictBool = False
    noise_key_file: StrictStr | None = None


WORKERS = ints(1, 1024)   # threads or processes: a local Dask cluster starts every one of its workers


class Orchestration(Section):
    """How the Prefect flow runs the stages (flows/runners.py); its byte sizes' rule: `orchestration_sizes`."""
    task_runner: Literal["threads", "dask"] = "threads"
    max_workers: Annotated[StrictInt, WORKERS] = 4
    dask_address: StrictStr | None = None
    dask_workers: Annotated[StrictInt, WORKERS] = 2
    dask_memory_limit: StrictStr = "auto"   # per worker process of the local cluster (Dask restarts one above it)
    dask_blocksize: StrictStr = "32MiB"     # bytes of the source per part read by the out-of-core validate/prepare

# -- the other sections' defaults (data-independent) and their ranges: the one place for both ----------------------
# Each section's model (`section_models`) takes its defaults and each numeric key's Range (pipelines/ranges.py) from
# here; its readers (the stages, through `Config`, and pipelines/weights/estimators.py, attacks/suite.py) take them
# from the model, so this module imports none of them. A row cap (`*max_rows`) has no upper bound: the stage reads
# min(cap, rows), and a cap above the table is the same as null (no cap).
# `evaluate:` knobs of DP-auto-GAN's metrics (pipelines/evaluation/unsupervised.py) and of the utility classifiers'
# and verdict's row cap (utility.py, verdict.py); null = no cap for the row caps
EVALUATE_DEFAULTS: dict[str, Any] = {
    "read_max_rows": 1_000_000,  # rows of each table the evaluation reads at all (real training, holdout, the
                            # synthetic rows measured): a seeded sample above it, read a row group at a time
    "max_rows": 10000,      # rows of R, S and T (each, seeded subsample) for the model-based metrics
    "utility_max_rows": 50000,  # rows of each table the utility classifiers and the verdict fit or score (seeded)
    "ot_max_rows": 2000,    # rows per side for exact optimal transport (W2)
    "kway": 3,              # k of the k-way marginal (NIST: 3)
    "kway_subsets": 100,    # random column k-subsets
    "kway_bins": 10}        # equal-width bins per numeric column over its schema bounds
EVALUATE_RANGES: dict[str, Range] = {
    "read_max_rows": nullable(ROWS_CAP), "max_rows": nullable(ROWS_CAP), "utility_max_rows": nullable(ROWS_CAP),
    "ot_max_rows": nullable(ROWS_CAP),
    # a k-subset's cells are one int64 mixed-radix index (pipelines/evaluation/marginals.py): cells^k below 2^63
    "kway": ints(1, 5, why="NIST's k is 3"),
    "kway_subsets": DRAWS, "kway_bins": ints(1, MAX_BINS)}
# `evaluate:` knobs of the scorecard (pipelines/evaluation/scorecard.py); null = no cap for the row caps
SCORECARD_DEFAULTS: dict[str, Any] = {
    "mmd_max_rows": 1000,          # rows per side of the MMD Gram matrix (seeded subsample)
    "mmd_permutations": 200,       # permutations of the MMD p-value
    "detection_max_rows": 2000,    # rows per class of the real-vs-synthetic detection classifier
    "classifier_max_rows": 5000,   # training rows (each table) of the 10 TSTR/TRTR classifiers
    "range_queries": 1000,         # PEARL I.1: 1,000 random range queries ...
    "range_query_attributes": 3}   # ... over three attributes each
SCORECARD_RANGES: dict[str, Range] = {
    "mmd_max_rows": nullable(ROWS_CAP), "mmd_permutations": DRAWS, "detection_max_rows": nullable(ROWS_CAP),
    "classifier_max_rows": nullable(ROWS_CAP), "range_queries": DRAWS,
    # more attributes than the schema's columns is refused by the queries themselves (pipelines/evaluation/queries.py)
    "range_query_attributes": ints(1)}
# the synthetic rows sampled and published (null: as many as the public training row count)
N_SAMPLES = ints(1, 10**9, nullable=True)
# `evaluate.attacks:` (pipelines/evaluation/attacks/suite.py; every random choice seeded by evaluate.seed)
ATTACKS_DEFAULTS: dict[str, Any] = {
    "max_rows": 2000,                 # members and non-members per membership/inference attack (each), and the
                                      # disclosure sets' size
    "pool_max_rows": 50000,           # synthetic rows the attacks search, training rows the copies' DCR searches,
                                      # holdout reference rows (seeded samples above it; Adult is under it)
    "bootstrap": 200,                 # bootstrap resamples of the membership AUC interval
    "n_attacks": 500,                 # targets (linkability, inference) or queries (singling out) per attack
    "singling_out_columns": 3,        # predicates per multivariate singling-out query
    "neighbours": 1,                  # linkability: nearest synthetic rows compared per side
    "secret": None,                   # the secret column; null = the schema's target
    "known": None,                    # the columns the attacker knows; null = every other column
    "linkability_columns": None,      # [[A...], [B...]]; null = a seeded random halving of the columns
    "tolerance": 0.05,                # a numeric guess is correct within this share of the schema range
    "disclosure_fraction": 0.05,      # thesis §4.3: set size as a share of the training rows
    "near_duplicate_distance": 0.01,  # Gower DCR at or below which a synthetic row is a near duplicate
}
# predicates per query and neighbours compared have no upper bound here: more than the schema's columns or the
# synthetic rows is refused by the attack itself (a NumPy choice without replacement)
ATTACKS_RANGES: dict[str, Range] = {
    "max_rows": ROWS_CAP, "pool_max_rows": ROWS_CAP, "bootstrap": ints(20, MAX_DRAWS), "n_attacks": DRAWS,
    "singling_out_columns": ints(1), "neighbours": ints(1), "tolerance": OPEN_FRACTION,
    "disclosure_fraction": OPEN_FRACTION, "near_duplicate_distance": OPEN_FRACTION}
# `risk_gates:` (pipelines/evaluation/attacks/gates.py)
RISK_GATES_DEFAULTS: dict[str, Any] = {
    "membership_auc_max": 0.6,      # lower bound of the DOMIAS and DCR membership AUCs
    "exact_match_excess_max": 0.0,  # lower bound of the exact-copy rate of S beyond the holdout's
    "singling_out_risk_max": 0.1,   # lower bounds of the anonymeter risks (0 = no risk)
    "linkability_risk_max": 0.1,
    "inference_risk_max": 0.1,
    "confidence": 0.95}             # family-wise, over all interval tests of one release
RISK_GATES_RANGES: dict[str, Range] = {**dict.fromkeys(RISK_GATES_DEFAULTS, UNIT), "confidence": OPEN_FRACTION}
# `utility_gate:` (pipelines/evaluation/verdict.py): a policy for each verdict word in UTILITY_WORDS
UTILITY_POLICIES = ("refuse", "label")
UTILITY_WORDS = ("inverted", "weak")
UTILITY_GATE_DEFAULTS: dict[str, Any] = {
    "inverted": "refuse",   # refuse | label: a table that predicts the opposite of the truth
    "weak": "label",        # refuse | label: a table no better than independent marginals
    "confidence": 0.95,     # of the inverted bound; family-wise over the "fit" claims
    "bootstrap": 200,       # resamples of the 2-way TV difference's standard error
    "baseline_draws": 5,    # independent-marginals tables whose AUROC spread is the task's noise floor
    "association_tolerance": 0.1}  # a feature is distorted when its association with the target is measurably
    # further from the real one than no association, and by more than this correlation (0.1: Cohen's "small")
UTILITY_GATE_RANGES: dict[str, Range] = {
    "confidence": OPEN_FRACTION, "bootstrap": ints(20, MAX_DRAWS), "baseline_draws": ints(2, 100),
    "association_tolerance": reals(ge=0, lt=1, why="a correlation")}
# `release:` (pipelines/selection.py): which of `generators` one release run trains and publishes
SELECT_MODES = ("auto", "all", "private")
SELECTION = "private_selection"  # the generator `select: private` trains (pipelines/generators/private_selection.py)
NON_DP_GATE_POLICIES = ("advise", "refuse")
RELEASE_DEFAULTS: dict[str, Any] = {
    "select": "auto",       # auto: the public rule picks ONE generator, which gets the whole release ε; all: every one;
                            # private: the DP selection among the others (the private_selection generator)
    "test_epsilon": 0.1,    # the DP release test of each published table (pipelines/privacy/release_test.py), pinned
    "test_excess_max": 0.05,  # share of training rows near the table, beyond the holdout's, that it tolerates
    "test_confidence": 0.99,  # a table within test_excess_max passes with at least this probability
    "non_dp_gates": "advise"}  # advise: the row-reading gates go to the steward report only (every public bit DP);
                               # refuse: they also block publication, and the manifest lists their non-DP bits
RELEASE_RANGES: dict[str, Range] = {
    "test_epsilon": reals(ge=0.001, why="below it the test's noise, of scale at least 1,000 rows, decides alone"),
    "test_excess_max": UNIT,
    "test_confidence": reals(ge=0.5, lt=1, why="a test that refuses most fresh tables is not a release test")}
SELECTED = "selected"       # weights.generators: the generators the release selects (auto: its one table)
# `weights:`: the weight stage's own keys, then the estimators' knobs (pipelines/weights/estimators.py)
WEIGHTS_STAGE_DEFAULTS: dict[str, Any] = {
    "estimator": "priv_mlp",
    "generators": SELECTED,       # or a list of generators (those of them the release selects get weights); []: none
    "epsilon": None,              # None: allocated from privacy.release_epsilon by `share`
    "share": 0.25,                # of a generator's 1.0: the weights refine the table, they are not a second table
    "khat_bound": 0.7,
    "tempering": 1.0,
    "psis": True,
    "calibration": None,
    "analysis_max_rows": 2000,
    "analysis_real_max_rows": 50000,  # real holdout / training rows the weighted analyses read (seeded): the
                                      # weight stage's evaluate.utility_max_rows, kept in this section because
                                      # weight@gen spends budget and so depends on no evaluate key
    "prior_variance": 10.0,
}
WEIGHTS_STAGE_RANGES: dict[str, Range] = {   # `epsilon` and `share`: the model's OptionalEpsilon and Share
    "khat_bound": POSITIVE, "tempering": reals(ge=0, le=1, why="1: no tempering"),
    "analysis_max_rows": ROWS_CAP, "analysis_real_max_rows": ROWS_CAP, "prior_variance": POSITIVE}
WEIGHT_ESTIMATORS = ("logreg", "mlp", "beta_noised", "output_lapl", "output_norm", "priv_mlp", "discriminator")
# Logistic: the paper's λ = 0.1; MLP: two ReLU layers (§4) trained by SGD at the paper's learning rate scale with
# lots of L = batch_size rows in expectation.
WEIGHT_ESTIMATOR_DEFAULTS: dict[str, Any] = {
    "l2": 0.1,                  # λ of J_D (logistic estimators)
    "rho_max": 0.5,             # output_lapl: largest Laplace scale ρ (< 1; < 1/2 keeps the variance finite)
    "gamma_max": 1.0,           # output_norm: largest Gaussian std γ (Var e^ζ' = e^{γ²} − 1)
    "hidden": [32, 32],         # mlp / priv_mlp
    "epochs": 3,                # passes over N_D + N_G in expectation: T = ceil(epochs / q); 3, not the paper's 10:
                                # at the default weights ε ≈ 0.22 on 455 rows, 10 gave k̂ 4.3-6.0 (ESS ≈ 1),
                                # 3 gave k̂ −0.10-0.15 (ESS 257-409; docs/importance-weights.md)
    "batch_size": 64,           # L: expected lot size, q = L / (N_D + N_G)
    "max_steps": 5000,          # T ≤ this (null: no cap), so a large table's weights cost what Adult's do (its
                                # 39,074 + 39,074 rows give T = 3,663); a capped T makes fewer passes
    "clip_norm": 1.0,           # C
    "lr": 0.05,
    "momentum": 0.9,
    "critic_temperature": 1.0,  # discriminator: w ∝ exp(D / T)
    "seed": 0,                  # public: initialisation and the synthetic rows' lots
    "noise_seed": None,         # DP noise and the private lots: OS entropy unless set (tests)
}
WEIGHT_ESTIMATOR_RANGES: dict[str, Range] = {
    "l2": POSITIVE, "rho_max": reals(gt=0, lt=1, why="Corollary 1 needs ρ < 1"),
    "gamma_max": reals(gt=0, le=10, why="the weights' noise e^ζ' has variance e^{γ²} − 1"),
    "hidden": WIDTHS, "epochs": EPOCHS, "batch_size": BATCH, "max_steps": nullable(STEPS), "clip_norm": POSITIVE,
    "lr": POSITIVE, "momentum": reals(ge=0, lt=1), "critic_temperature": POSITIVE, "seed": SEED,
    "noise_seed": NOISE_SEED,
}


# the sections' models: each key's default and type in one place (module-level classes, so a Config pickles by
# reference to a Dask worker)
Attacks = section_model("Attacks", ATTACKS_DEFAULTS, ATTACKS_RANGES)
Evaluate = section_model("Evaluate", {**EVALUATE_DEFAULTS, **SCORECARD_DEFAULTS, "seed": 0},
                         {**EVALUATE_RANGES, **SCORECARD_RANGES, "seed": SEED},
                         n_samples=(Annotated[StrictInt | None, N_SAMPLES], None),
                         attacks=(Annotated[Attacks, BeforeValidator(lambda v: {} if v is None else v)],
                                  Field(default_factory=Attacks)))
RiskGates = section_model("RiskGates", RISK_GATES_DEFAULTS, RISK_GATES_RANGES)
UtilityGate = section_model("UtilityGate", UTILITY_GATE_DEFAULTS, UTILITY_GATE_RANGES,
                            **{k: (Literal[UTILITY_POLICIES], UTILITY_GATE_DEFAULTS[k]) for k in UTILITY_WORDS})
Weights = section_model("Weights", {**WEIGHTS_STAGE_DEFAULTS, **WEIGHT_ESTIMATOR_DEFAULTS},
                        {**WEIGHTS_STAGE_RANGES, **WEIGHT_ESTIMATOR_RANGES},
                        epsilon=(OptionalEpsilon, None), share=(Share, WEIGHTS_STAGE_DEFAULTS["share"]),
                        calibration=(StrictStr | None, None),
                        generators=(Literal[SELECTED] | list[StrictStr], SELECTED))
Release = section_model("Release", RELEASE_DEFAULTS, RELEASE_RANGES,
                        select=(Literal[SELECT_MODES], RELEASE_DEFAULTS["select"]),
                        non_dp_gates=(Literal[NON_DP_GATE_POLICIES], RELEASE_DEFAULTS["non_dp_gates"]))


def section_models() -> dict[str, type[Section]]:
    """The models of the sections, by key path."""
    return {"dataset": Dataset, "privacy": Privacy, "orchestration": Orchestration, "evaluate": Evaluate,
            "evaluate.attacks": Attacks, "risk_gates": RiskGates, "utility_gate": UtilityGate, "weights": Weights,
            "release": Release}


@cache
def generator_defaults(name: str) -> tuple[dict[str, Any], Any]:
    """A registered generator's DEFAULTS and its module's `check_params` (None where it has none)."""
    module = importlib.import_module(generator_module(name))
    return module.DEFAULTS, getattr(module, "check_params", None)


@cache
def generator_model(name: str) -> type[Section]:
    """A generator's section: the keys of its DEFAULTS, typed by them and checked by its module's RANGES; ε parsed
    (absent or null: allocated from privacy.release_epsilon), plus its `share` of the release ε."""
    module = importlib.import_module(generator_module(name))
    return section_model(f"{name}_params", module.DEFAULTS, module.RANGES, epsilon=(OptionalEpsilon, None),
                         share=(Share, None))


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


def error_of(errors: list[dict[str, Any]], model: type[Section], raw: dict, prefix: str, file: str,
             kind: str) -> InputError:
    """One InputError for pydantic's `errors`: unknown keys (with the closest known key), retired keys,
    missing keys, a value out of its key's Range (the range and the default named), or a wrong value (every
    alternative of a union named)."""
    first = errors[0]
    loc = key_path(model, first)
    parent = ".".join(p for p in (prefix, *loc[:-1]) if p)
    key = ".".join(p for p in (parent, loc[-1]) if p)
    if first["type"] == "extra_forbidden":
        retired = RETIRED.get((kind, loc[-1]))
        if retired and len(loc) == 1:
            problem, fix = retired
            return fail(file, key, problem, fix.format(section=prefix))
        unknown = sorted(key_path(model, x)[-1] for x in errors
                         if x["type"] == "extra_forbidden" and key_path(model, x)[:-1] == loc[:-1])
        known = sorted(nested_model(model, loc[:-1]).model_fields)
        close = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return fail(file, key, f"unknown {parent or 'top-level'} keys {unknown}.",
                    f"{hint}rename or remove the unknown keys; known keys: {', '.join(known)}.")
    if first["type"] == "missing":
        return fail(file, key, "missing.", f"add '{loc[-1]}:' under '{parent}:' (params.yaml lists every key).")
    out_of_range = next((x["ctx"]["error"] for x in errors if key_path(model, x) == loc
                         and isinstance(x.get("ctx", {}).get("error"), OutOfRange)), None)
    if out_of_range is not None:
        field = nested_model(model, loc[:-1]).model_fields[loc[-1]]
        default = () if field.is_required() else (field.get_default(call_default_factory=True),)
        return fail(file, key, f"{out_of_range}, got {first['input']!r}.", out_of_range.allowed.fix(key, *default))
    msgs = dict.fromkeys(x["msg"].removeprefix("Value error, ") for x in errors if key_path(model, x) == loc)
    problem = " or ".join(msgs)
    return fail(file, key, f"{problem[:1].lower()}{problem[1:]}, got {first['input']!r}.",
                f"give '{key}' a value of the type its default has (see the section's comments in params.yaml).")


def key_path(model: type[Section] | None, error: dict[str, Any]) -> tuple[str, ...]:
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
    return next((a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, Section)),
                None)


def nested_model(model: type[Section], loc: tuple[str, ...]) -> type[Section]:
    """The model of the mapping at `loc` inside `model`."""
    for part in loc:
        model = nested_section(model.model_fields[part].annotation)
    return model


def check_pinned_or_share(section: str, raw: dict[str, Any], file: str = PARAMS_FILE) -> None:
    """A part of the release (a generator, `weights`) pins its own ε or takes a share of the release ε, not both."""
    if raw.get("epsilon") is not None and raw.get("share") is not None:
        raise fail(file, f"{section}.share", f"given together with '{section}.epsilon': a pinned ε keeps its value "
                   f"and takes no share of privacy.release_epsilon.",
                   f"remove 'share:' (keep the pinned ε) or 'epsilon:' (allocate '{section}' from the release ε).")


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
        section = {**section, "candidates": list(candidates),
                   "sections": {g: config.generator(g) for g in candidates}}
    return section


def check_generator(name: str, raw: Any, file: str = PARAMS_FILE, release_epsilon: float = 1.0) -> dict[str, Any]:
    """A generator's section over its DEFAULTS: keys, types and ranges (`generator_model`), pinned ε or share, the
    steps-or-epochs rule of every training phase, then the module's own `check_params` (at the pinned ε, else at
    `release_epsilon`, which says whether the allocated ε will be finite); returns the section with a given ε and
    share as floats (no ε, or ε null: allocated from the release ε)."""
    section = check(generator_model(name), raw, name, file, kind="generator")
    check_pinned_or_share(name, raw, file)
    defaults, check_params = generator_defaults(name)
    for steps in (k for k in defaults if k.endswith("steps") and k[:-5] + "epochs" in defaults):
        epochs = steps[:-5] + "epochs"
        if raw.get(steps) is not None and raw.get(epochs) is not None:
            raise fail(file, f"{name}.{epochs}", f"given together with '{name}.{steps}'.",
                       f"give '{steps}' or '{epochs}', not both.")
    params = {**raw, **{k: getattr(section, k) for k in ("epsilon", "share") if k in raw}}  # parsed where given
    if check_params is not None or "calibration" in defaults:
        try:
            if "calibration" in defaults:  # the nested `calibration:` mapping over the generator's own defaults
                calibration_params(name, defaults["calibration"], raw.get("calibration"))
            if check_params is not None:
                check_params({**defaults, **allocated_section(params, section.epsilon or release_epsilon)})
        except ParamError as e:
            raise fail(file, e.key, f"{e.problem}.".replace("..", "."), e.fix or f"correct '{e.key}' (the keys and "
                       f"defaults of '{name}:': {generator_module(name)}.DEFAULTS).") from None
        except ValueError as e:
            raise fail(file, name, f"{e}.".replace("..", "."), f"correct the value under '{name}:' "
                       f"(its keys and defaults: {generator_module(name)}.DEFAULTS).") from None
    return params


def noise_seed_keys(params: dict[str, Any]) -> list[str]:
    """The key paths that fix DP noise to an integer (`dataset.noise_seed`, `dpwgan.noise_seed`, ...,
    `weights.noise_seed`): every section (the data set's noisy row count, each registered generator, the
    weights) whose `noise_seed` is set, in that order."""
    from pipelines.generators.names import GENERATORS
    return [f"{section}.noise_seed" for section in ("dataset", *GENERATORS, "weights")
            if isinstance(params.get(section), dict) and params[section].get("noise_seed") is not None]


def check_noise_seeds(params: dict[str, Any], file: str, internal_release: bool) -> None:
    """A `noise_seed` (tests, audits) makes the DP noise a function of a number anyone who reads the configuration
    knows: it can be regenerated and subtracted. Refused anywhere unless `privacy.internal_release` is true (the
    manifest then names the sections that set it, tasks/release.py)."""
    keys = noise_seed_keys(params)
    for key in keys:
        section = key.rsplit(".", 1)[0]
        value = params[section]["noise_seed"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(file, key, f"must be an integer or null, got {value!r}.",
                       f"delete 'noise_seed:' under '{section}:'.")
    if keys and not internal_release:
        section = keys[0].rsplit(".", 1)[0]
        also = f" (also set: {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise fail(file, keys[0], f"a fixed noise seed in a public release{also}: the DP noise would follow from a "
                   "number anyone who reads the configuration knows, so it could be regenerated and subtracted "
                   "and the release would have no privacy guarantee.",
                   f"delete 'noise_seed:' under '{section}:' (and every other noise_seed). For reproducible noise, "
                   "give the steward's secret key instead (environment variable SYNTHRELEASE_NOISE_KEY, or "
                   "privacy.noise_key_file outside the repository); for a release that never leaves the "
                   "organisation, set 'privacy.internal_release: true'.")


# -- the sections' rules beyond their types and ranges (the models); each problem one InputError naming the key ------
def default_of(key: str, name: str) -> Any:
    """The default of key `name` in section `key` (its model's)."""
    return section_models()[key].model_fields[name].default


def orchestration_sizes(s: Any, generators: Sequence[str] | None) -> None:
    """The worker memory limit ('auto': Dask's, the machine's memory shared by the workers) and the part size, byte
    counts of at least 1MiB (Dask's `parse_bytes`)."""
    for key in ("dask_memory_limit", "dask_blocksize"):
        if getattr(s, key) in (default_of("orchestration", key), "auto" if key == "dask_memory_limit" else None):
            continue   # dask.utils is slow to import, and every stage loads the configuration
        from dask.utils import parse_bytes
        try:
            size = parse_bytes(getattr(s, key))
        except ValueError:
            size = 0
        if size < 1 << 20:
            raise fail(PARAMS_FILE, f"orchestration.{key}", f"must be a byte count of at least 1MiB, got "
                       f"{getattr(s, key)!r}.", f"e.g. '{key}: {default_of('orchestration', key)}'.")


def weight_rules(s: Any, generators: Sequence[str] | None) -> None:
    """The `weights:` section: a known estimator, generators among the configured ones (`generators`; None: a
    section read alone, by the estimators), and calibration rows only for an estimator that privatises its
    classifier."""
    file = PARAMS_FILE
    if s.estimator not in WEIGHT_ESTIMATORS:
        raise fail(file, "weights.estimator", f"{s.estimator!r} is not implemented.",
                   f"use one of {', '.join(WEIGHT_ESTIMATORS)}.")
    if generators is not None and s.generators != SELECTED and any(g not in generators for g in s.generators):
        raise fail(file, "weights.generators", f"must be '{SELECTED}' or a list of generators from 'generators', "
                   f"got {s.generators!r}.", f"e.g. 'generators: {SELECTED}' (the published table), [dpwgan] or [].")
    if s.calibration is not None and s.estimator in ("output_lapl", "output_norm"):
        raise fail(file, "weights.calibration", f"needs the classifier's scores on the calibration rows; "
                   f"{s.estimator} privatises only the released weights, so scoring other rows would leak the "
                   f"non-private classifier.", "set 'weights.calibration: null' or use priv_mlp, beta_noised or "
                   "discriminator.")


RULES = {"orchestration": orchestration_sizes, "weights": weight_rules}


def section(key: str, raw: Any, generators: Sequence[str] | None = None, file: str = PARAMS_FILE) -> Any:
    """Section `key` of a params file ("release", "evaluate.attacks", ...) checked by its model (types, ranges,
    defaults filled) and its RULES: how `parse_params` builds each of `Config`'s sections, and what reads one section
    alone (the weight estimators, the attack suite, a section in a test). `generators`: the configured
    generators, which `weights.generators` must name (None: not checked). One InputError naming `file`."""
    s = check(section_models()[key], raw, key, file)
    try:
        if key in RULES:
            RULES[key](s, generators)
    except InputError as e:  # the rules name params.yaml; this is the file actually read
        raise InputError(e.problem, file=file, column=e.column, fix=e.fix) from None
    return s


def generator_module(name: str) -> str:
    """The parameters module of registered generator `name` (DEFAULTS, check_params; imports no torch)."""
    from pipelines.generators.names import params_module
    return params_module(name)


def release_model() -> type[Section]:
    """The whole file: its sections, and a mapping for each registered generator (checked by `check_generator`)."""
    from pipelines.generators.names import GENERATORS
    models = section_models()
    return create_model("ReleaseFile", __base__=Section, dataset=(models["dataset"], ...),
                        privacy=(models["privacy"], ...), device=(Literal["auto", "cpu", "cuda"], None),
                        orchestration=(models["orchestration"] | None, None), generators=(list[StrictStr], ...),
                        evaluate=(models["evaluate"] | None, None), risk_gates=(models["risk_gates"] | None, None),
                        weights=(models["weights"] | None, None), utility_gate=(models["utility_gate"] | None, None),
                        release=(models["release"] | None, None),
                        **{g: (dict[str, Any] | None, None) for g in GENERATORS})


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
        raise InputError("the release configuration is missing.", file=file,
                         fix="run from the project root or pass --params PATH.")
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
        raise fail(file, EXTENDS, f"{PARAMS_FILE} is the file dvc.yaml reads and must be whole: DVC would not see a "
                   "change in the file it extends.", f"keep the overrides in params/NAME.yaml and run "
                   f"`synthrelease --params params/NAME.yaml resolve --out {PARAMS_FILE}`.")
    if not isinstance(base, str) or not base:
        raise fail(file, EXTENDS, f"must be the path of the params file this one overrides, got {base!r}.",
                   "e.g. 'extends: ../params.yaml'.")
    base_path = path.parent / base
    if base_path.resolve() in _seen + (path.resolve(),):
        raise fail(file, EXTENDS, f"'{base}' extends this file again (a circle).", "extend a whole params file.")
    return merged(read_params(base_path, _seen + (path.resolve(),)), params)


def resolved_text(path: str | Path) -> str:
    """The whole params file an override file stands for (`read_params`), as YAML, after `load_params` has
    checked it: what `dvc repro` needs in params.yaml to run that configuration."""
    load_params(path)
    header = (f"# written by `synthrelease --params {path} resolve` from {path} and the files it extends:\n"
              f"# edit those, then resolve again, rather than this file.\n")
    return header + yaml.safe_dump(read_params(path), sort_keys=False, allow_unicode=True, width=100)


@dataclass(frozen=True)
class Config:
    """The release configuration, checked once (`parse_params`): what every stage and flow reads.

    Each section is its model's instance (pipelines/config.py `section_models`: defaults filled, types and ranges
    checked); a generator's section is the mapping its class takes (`generator`, `generator_params`: a generator
    is built from a dict of its parameters, as scikit-learn's `set_params`). `given` is the checked mapping the
    file gave (ε parsed to floats): the params hashes come from it (`params_hash`, and each stage's by dvc.yaml's
    key paths, tasks/common.py), so they cover exactly what DVC tracks; the generators' sections are read from it
    (`generator`), every other setting from its section's model."""
    file: str
    given: dict[str, Any]
    dataset: Dataset
    privacy: Privacy
    device: Literal["auto", "cpu", "cuda"]
    orchestration: Orchestration
    generators: tuple[str, ...]
    evaluate: Evaluate      # its `attacks`: Attacks
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
        return params_hash(self.given)


def parse_params(params: dict[str, Any], file: str = PARAMS_FILE) -> Config:
    """A params mapping (`read_params`'s) checked once (module docstring): every problem one InputError naming
    `file`, before any stage runs. What needs the schema (the columns a section names) is checked by the validate
    and budget stages, before any budget is spent (tasks/common.py `check_against_schema`)."""
    params = copy.deepcopy(params)  # `given` is the Config's own
    for key in ("dataset", "privacy"):  # the sections' own key paths, not a top-level type error
        check(section_models()[key], params.get(key), key, file)
    config = check(release_model(), params, "", file)
    gens = params["generators"]
    if not gens:
        raise fail(file, "generators", "must be a non-empty list.", "e.g. 'generators: [dpwgan]'.")
    from pipelines.generators.names import GENERATORS
    for g in gens:
        if g not in GENERATORS:
            close = difflib.get_close_matches(g, GENERATORS, n=1)
            raise fail(file, "generators", f"'{g}' is not a registered generator.",
                       f"{'did you mean ' + repr(close[0]) + '? ' if close else ''}use {', '.join(GENERATORS)}.")
        if g not in params:
            raise fail(file, g, f"generator '{g}' is listed but has no '{g}:' section.",
                       f"add a '{g}:' section (empty: every default, and an equal share of privacy.release_epsilon).")
        params[g] = params[g] or {}
    privacy, dataset = config.privacy, config.dataset
    for g in (g for g in GENERATORS if params.get(g) is not None):
        params[g] = check_generator(g, params[g], file, privacy.release_epsilon)
    check_pinned_or_share("weights", params.get("weights") or {}, file)
    check_noise_seeds(params, file, privacy.internal_release)
    sections = {key: section(key, params.get(key), gens, file)
                for key in ("orchestration", "evaluate", "risk_gates", "utility_gate", "weights", "release")}
    # the mapping hashed (Config.given): the file's values, ε and the dropped fraction as the floats they mean
    params["dataset"] = {**params["dataset"], "max_dropped_fraction": dataset.max_dropped_fraction}
    params["privacy"] = {**params["privacy"], **{k: getattr(privacy, k) for k in (
        "row_count_epsilon", "row_loss_epsilon", "lifetime_epsilon", "release_epsilon")}}
    params.setdefault("device", "auto")
    params.setdefault("evaluate", {})
    return Config(file=file, given=params, dataset=dataset, privacy=privacy, device=params["device"],
                  generators=tuple(gens), **sections)


def load_params(path: str | Path = PARAMS_FILE) -> Config:
    """Read a params file (`read_params`: params.yaml, or an override file over it) and check it once
    (`parse_params`); every problem is one InputError."""
    return parse_params(read_params(path), str(path))


def params_hash(params: dict[str, Any]) -> str:
    """The hash of a params mapping (`Config.given`, or the part of it one stage reads)."""
    return sha256_text(canonical_json(params))


ALLOCATION_SUMMARY = "release"    # data/allocation/<ds>/release.json: the whole allocation, next to the parts'
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
