"""The private selection's trial-count law: the per-trial ε a release ε buys (plans only; no row is read).

    python -m benchmarks.select_law          # params/private.yaml's candidates on the bundled table and on Titanic

For each schema and release ε ∈ {0.3, 1, 3} (δ = 1e-5, n̂ = the schema's public training count): the per-trial
ε x that `PrivateSelection._plan` finds (the largest whose selection event costs at most ε, by RDP), under the law
the selection draws (logarithmic, η = 0) and under the geometric law it drew before (η = 1), both at mean μ = 3
(`mean_trials`); a candidate trains at 0.75·x and the score is released at 0.25·x. Also the laws' P(T = 1) and the
probability that the favoured candidate (half the trials) is never tried, 1 − E[2^−T].
"""

from __future__ import annotations

import math
from pathlib import Path

from pipelines.config import generator_params, parse_params, merged, read_params
from pipelines.data.schema import load_schema
from pipelines.data.transform import Encoder
from pipelines.generators.base import Budget
from pipelines.generators.private_selection import TRIAL_RTOL
from pipelines.generators.registry import make_generator
from pipelines.privacy.accountant import epsilon_rdp, smallest_satisfying
from pipelines.privacy.events import GEOMETRIC_SHAPE, RepeatAndSelectEvent
from pipelines.generators.mechanisms.repeat_select import trial_law

ROOT = Path(__file__).resolve().parents[1]

DELTA = 1e-5
SCHEMAS = {
    "breast_cancer (bundled)": ROOT / "schemas" / "breast_cancer.yaml",
    "titanic": ROOT / "benchmarks" / "schemas" / "titanic.yaml",
}


def per_trial(schema_path: Path, epsilon: float) -> tuple[float, float, int]:
    """(x logarithmic, x geometric, n̂) for params/private.yaml's selection on this schema at release ε."""
    config = parse_params(merged(read_params(ROOT / "params.yaml"), read_params(ROOT / "params" / "private.yaml")))
    schema = load_schema(schema_path)
    n = schema.rows.train_count(config.dataset.holdout_fraction)
    gen = make_generator(
        "private_selection", Encoder(schema).layout, generator_params(config, "private_selection", epsilon), "cpu"
    )
    x_log = gen.plan(n, Budget(epsilon, DELTA)).trial_epsilon
    mean = float(gen.params.mean_trials)

    def geometric(x: float) -> RepeatAndSelectEvent:
        return RepeatAndSelectEvent(gen._trial_events(n, x, DELTA), mean, GEOMETRIC_SHAPE)

    s = smallest_satisfying(lambda s: epsilon_rdp([geometric(epsilon / s)], DELTA), epsilon, TRIAL_RTOL, start=2.0)
    return x_log, epsilon / s, n


def main() -> None:
    gamma, _ = trial_law(3.0)
    g = float(gamma)
    log_t1, log_never = (1 - g) / math.log(1 / g), math.log(1 - (1 - g) / 2) / math.log(g)
    print(
        f"mean 3: P(T = 1) logarithmic {log_t1:.3f}, geometric {1 / 3:.3f}; favoured candidate never tried: "
        f"logarithmic {log_never:.3f}, geometric {(1 / 3) * 0.5 / (1 - (2 / 3) * 0.5):.3f}"
    )
    print("| schema | n̂ | release ε | per-trial ε, logarithmic | geometric | ratio |")
    print("|---|---|---|---|---|---|")
    for name, path in SCHEMAS.items():
        for eps in (0.3, 1.0, 3.0):
            x_log, x_geo, n = per_trial(path, eps)
            print(f"| {name} | {n} | {eps} | {x_log:.3f} | {x_geo:.3f} | {x_log / x_geo:.2f} |", flush=True)


if __name__ == "__main__":
    main()
