"""The parameter model's vocabulary: the base class of every params.yaml section and generator, the value types
its fields use, and the one reference page written from the declarations.

A section or a generator is one pydantic class; each field carries its type, its default, its range (a
`pipelines.ranges.Range` in the annotation, checked after the type) and a one-line description
(`Field(default, description=...)`). Nothing else states a default or a range: the configuration check
(pipelines/config.py), a generator built directly and docs/parameters.md (`reference`) all read the class.
Rules between keys are the class's model validators; they raise `ParamError` naming the key, which the
configuration check turns into one InputError naming the file, the key, the problem and the fix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    model_validator,
)

from pipelines.errors import ParamError
from pipelines.ranges import BIN_COUNT, NOISE_SEED, POSITIVE, SEED, OutOfRange, Range, ints, nullable, reals

Number = Union[StrictInt, StrictFloat]
Real = Annotated[Number, AfterValidator(float)]  # a number, read as a float


class Section(BaseModel):
    """A params.yaml mapping: unknown keys refused, values as YAML gave them (strict types; a number of a float
    key read as a float), read-only once checked."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, protected_namespaces=())


EPSILON = reals(gt=0, infinite=True)  # inf: no privacy, which the ledger gate refuses outside an internal release


def epsilon_number(value: Any) -> Any:
    """ε as params.yaml may write it: a number, or a string such as 'inf' (YAML reads `inf` and `1e-1` as strings),
    as a float; anything else as NaN, which EPSILON refuses."""
    if value is None:
        return None
    try:
        return math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return math.nan


Epsilon = Annotated[Any, BeforeValidator(epsilon_number), EPSILON]
# a part's own ε, pinned (a positive number or inf) or null/absent (allocated from privacy.release_epsilon)
OptionalEpsilon = Annotated[Any, BeforeValidator(epsilon_number), nullable(EPSILON)]
# a part's share of the release ε (pipelines/privacy/allocation.py); null: an equal share
Share = Annotated[Any, nullable(POSITIVE)]  # the Range checks the type: a bool is refused by it


class Calibration(Section):
    """The `calibration:` mapping every generator accepts: DP marginal calibration of its samples
    (pipelines/marginal/calibrate.py). Each generator declares its own default `share` (0 turns it off: MST and
    AIM measure marginals themselves); a given mapping is read over that default."""

    share: Annotated[Real, reals(ge=0, lt=1, why="0 turns calibration off; the method needs the rest of ε")] = Field(
        0.0, description="fraction of the generator's ε spent on the noisy marginals (0: off)"
    )
    pairs: (
        Literal["target", "none"] | list[Literal["target"] | Annotated[list[str], Field(min_length=2, max_length=2)]]
    ) = Field(
        "target",
        description="2-way marginals measured: 'target' (every column with the target), 'none', or a "
        "list of 'target' and column pairs, e.g. [target, [relationship, sex]]",
    )
    oversample: Annotated[int, ints(1, 100)] = Field(
        5, description="M = oversample × n rows drawn from the generator, raked, then n resampled"
    )
    sweeps: Annotated[int, ints(1, 10**4)] = Field(
        50, description="raking sweeps over every measured marginal (at most; stops at `tolerance`)"
    )
    tolerance: Annotated[Real, POSITIVE] = Field(
        1e-6, description="largest total variation distance between a raked and a target marginal"
    )
    max_noise_tv: Annotated[Real | None, reals(gt=0, nullable=True, why="null: never off")] = Field(
        None,
        description="off when the noise's expected 1-way TV error exceeds it (the method then gets all of "
        "ε); null: always on",
    )

    @model_validator(mode="after")
    def _distinct_pairs(self) -> "Calibration":
        for pair in self.pairs if isinstance(self.pairs, list) else ():
            if pair != "target" and pair[0] == pair[1]:
                raise ParamError("pairs", f"must pair two distinct columns, got {pair!r}")
        return self


class GeneratorParams(Section):
    """The keys every generator shares; a generator's class adds its method's keys. `phases`: the training
    phases with a `<phase>steps` / `<phase>epochs` pair (give one, not both; given steps void the default
    epochs)."""

    phases: ClassVar[tuple[str, ...]] = ()

    epsilon: OptionalEpsilon = Field(
        1.0,
        description="pinned ε of this generator ('inf': non-private); absent or null in params.yaml: "
        "allocated from privacy.release_epsilon by `share` (1.0 for a generator built outside a release)",
    )
    share: Share = Field(None, description="share of privacy.release_epsilon when ε is not pinned; null: equal")
    seed: Annotated[int, SEED] = Field(
        0, description="public seed: initialisation, batches of synthetic rows, sampling"
    )
    noise_seed: Annotated[int | None, NOISE_SEED] = Field(
        None,
        description="fixed DP noise (tests and audits of internal releases only; null: the steward key or OS entropy)",
    )
    calibration: Calibration = Field(Calibration(), description="DP marginal calibration of the samples")

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        """The steps-or-epochs rule of each phase, and a given `calibration:` over this generator's default."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for phase in cls.phases:
            steps, epochs = f"{phase}steps", f"{phase}epochs"
            if data.get(steps) is not None and data.get(epochs) is not None:
                raise ParamError(
                    epochs,
                    f"given together with '{steps}' (give one, not both)",
                    f"give '{steps}' or '{epochs}', not both.",
                )
            if data.get(steps, cls.model_fields[steps].default) is not None:
                data[epochs] = None
        given = data.get("calibration")
        if given is None:
            data.pop("calibration", None)
        elif isinstance(given, dict):
            data["calibration"] = {"share": cls.model_fields["calibration"].default.share, **given}
        return data


def calibration(share: float) -> Any:
    """The `calibration` field of a generator whose default calibration share is `share`."""
    return Field(Calibration(share=share), description="DP marginal calibration of the samples")


class Encoded(GeneratorParams):
    """The encoding every deep generator offers for numeric columns and long code lists (the map is
    `pipelines.data.bins.BinnedEncoding`; no budget)."""

    numeric_encoding: Literal["scaled", "bins"] = Field(
        "scaled",
        description="scaled: a numeric column is one value in [0, 1]; bins: a one-hot over its public "
        "bins plus the offset inside the bin",
    )
    numeric_bins: Annotated[int, BIN_COUNT] = Field(
        20, description="bins per numeric column without public edges (numeric_encoding: bins)"
    )
    code_lists: Literal["buckets", "one_hot"] = Field(
        "buckets",
        description="buckets: a code list of more than 100 codes is a one-hot over 64 buckets plus the "
        "code's place in its bucket; one_hot: one column per code",
    )


def parsed(model: type[Section], given: Any, section: str) -> Any:
    """`given` (a mapping, None, or already a `model`) as a `model` instance, for a generator or estimator built
    directly: a ParamError naming `section`.key for the first problem (the configuration check names the file,
    pipelines/config.py `check`)."""
    from pydantic import ValidationError

    if isinstance(given, model):
        return given
    try:
        return model.model_validate(given or {})
    except ValidationError as e:
        first = e.errors()[0]
        cause = rule_broken(first)
        if cause is not None:
            key = rule_key(section, tuple(str(p) for p in first["loc"]), cause)
            raise ParamError(key, cause.problem, cause.fix) from None
        loc = [str(p) for p in first["loc"]]
        key = ".".join([section, *loc])
        if first["type"] == "extra_forbidden":
            unknown = sorted(str(x["loc"][-1]) for x in e.errors() if x["type"] == "extra_forbidden")
            raise ParamError(
                key, f"is unknown: unknown {section} parameters {unknown}; known: {sorted(model.model_fields)}"
            ) from None
        allowed = (first.get("ctx") or {}).get("error")
        if isinstance(allowed, OutOfRange):
            field = model.model_fields.get(loc[0]) if len(loc) == 1 else None
            default = () if field is None or field.is_required() else (field.get_default(call_default_factory=True),)
            raise ParamError(
                key, f"{allowed}, got {first.get('input')!r}", allowed.allowed.fix(key, *default)
            ) from None
        if first["type"] == "literal_error":
            raise ParamError(key, f"must be one of {first['ctx']['expected']}, got {first.get('input')!r}") from None
        raise ParamError(key, f"{first['msg'][:1].lower()}{first['msg'][1:]}, got {first.get('input')!r}") from None


def rule_broken(error: Mapping[str, Any]) -> ParamError | None:
    """The ParamError a model's validator raised, from pydantic's error entry (None: another kind of error)."""
    cause = (error.get("ctx") or {}).get("error")
    return cause if isinstance(cause, ParamError) else None


def rule_key(section: str, loc: tuple[str, ...], cause: ParamError) -> str:
    """The key path of a broken rule: `section`, the location of the model whose validator raised it (a nested
    mapping such as `calibration`; a field validator's own field is the rule's key), then the rule's key."""
    parts = list(loc)
    if parts and parts[-1] == cause.key:
        parts.pop()
    return ".".join(p for p in (section, *parts, cause.key) if p)


# -- the reference page (docs/parameters.md) -------------------------------------------------------------------------
def type_words(annotation: Any) -> str:
    """A field's type in words: 'integer', 'number', 'true/false', 'one of a | b', 'list', 'mapping'."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return type_words(args[0])
    if origin is Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        words = list(dict.fromkeys(type_words(a) for a in args if a is not type(None)))
        return "number" if words == ["integer", "number"] else " or ".join(words)
    if origin is list:
        return "list"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return "mapping"
    names = {
        bool: "true/false",
        int: "integer",
        float: "number",
        str: "text",
        StrictInt: "integer",
        StrictFloat: "number",
    }
    return names.get(
        annotation, "number" if annotation in (Number, Any) else str(getattr(annotation, "__name__", annotation))
    )


def field_range(annotation: Any) -> str:
    """The Range a field's annotation carries, in words ('' where it has none)."""
    found = [m for m in getattr(annotation, "__metadata__", ()) if isinstance(m, Range)]
    return found[0].describe() if found else ""


def default_words(value: Any) -> str:
    """A default as params.yaml writes it."""
    if isinstance(value, Section):
        return "see below"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return "null" if value is None else json.dumps(value)


def reference_rows(model: type[Section]) -> list[str]:
    """One Markdown table row per field of `model`: key, type, default, range, description."""
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        metadata = [m for m in field.metadata if isinstance(m, Range)]
        allowed = metadata[0].describe() if metadata else field_range(annotation)
        default = "required" if field.is_required() else default_words(field.get_default(call_default_factory=True))
        rows.append(f"| `{name}` | {type_words(annotation)} | {default} | {allowed} | {field.description or ''} |")
    return rows


def reference_table(title: str, model: type[Section]) -> str:
    """A section's part of the reference page: its docstring's first paragraph, then its table."""
    doc = " ".join((model.__doc__ or "").split("\n\n")[0].split())
    head = ["", f"### `{title}`", ""] + ([doc, ""] if doc else [])
    return "\n".join(
        head + ["| key | type | default | range | description |", "|---|---|---|---|---|", *reference_rows(model)]
    )
