"""MST generator (McKenna, Miklau & Sheldon 2021) on Private-PGM (`mbi`): the mechanism is
`pipelines.marginal.mst`; this module wraps it in the generator contract (plan / fit / sample / save / load).

Encoded rows are discretised from public facts only (`pipelines.marginal.discretize`): equal-width bins over
the schema bounds (`n_bins`), or, when `schema` names the data set's schema YAML, integer-aligned bins and the
schema's optional per-column public `bins` edges (overridable here by `bins: {column: [edges]}`, schema
units). Sampling draws codes from the fitted graphical model and decodes a numeric bin by a uniform draw
inside it. Design, derivations and evidence: docs/aim-mst.md.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.data.layout import Layout
from pipelines.errors import ParamError
from pipelines.generators.base import Budget, BudgetSession, check_encoded, merge_params, reserve_plan
from pipelines.generators.persistence import save_model
from pipelines.marginal import estimate as est
from pipelines.marginal.discretize import Discretizer, columns_from_schema
from pipelines.marginal.mst import plan_mst, run_mst
from pipelines.privacy.events import Event, event_to_dict
from pipelines.privacy.noise import numpy_noise_rng
from pipelines.progress import report

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,        # target ε; "inf" measures exact marginals (non-private)
    "delta": 1e-5,         # used only when fit() gets no budget and plan() was not called
    "n_bins": 32,          # equal-width bins per numeric column (over the schema bounds)
    "schema": None,        # path of the data set's schema YAML: integer-aligned bins and its public `bins` edges
    "bins": {},            # {column: [edges in schema units]}: public edges (needs `schema`), over the schema's
    "iters": 2000,         # mirror-descent iterations of the final estimation
    "steps": None,         # unused (contract: merge_params reads steps/epochs)
    "epochs": None,
    "seed": 0,             # sampling (public)
    "noise_seed": None,    # DP noise: None = OS entropy (pipelines/privacy/noise.py); an integer is for tests only
}


def check_params(params: dict[str, Any], name: str = "mst") -> None:
    """The params-only rule of an `mst:` (or AIM's) section over DEFAULTS (ParamError naming the key); the
    bins' columns are checked against the schema when the generator is built."""
    if params["schema"] is None and params["bins"]:
        raise ParamError(f"{name}.bins", "needs 'schema' (the edges are in schema units)")


class MST:
    """MST generator (see module docstring). `params`: the params.yaml section; DEFAULTS fill gaps."""

    name = "mst"
    defaults = DEFAULTS

    def __init__(self, layout: Layout, params: dict | None = None, device: str = "cpu") -> None:
        self.layout, self.device = layout, device
        self.params = merge_params(self.name, self.defaults, params)
        check_params(self.params, self.name)
        self.discretizer = Discretizer(layout, int(self.params["n_bins"]), self._columns())
        self.privacy: dict[str, Any] | None = None
        self.model = None
        self.structure: dict[str, Any] = {}

    def _columns(self) -> dict[str, dict[str, Any]]:
        p = self.params
        if p["schema"] is None:
            return {}
        from pipelines.data.schema import load_schema
        cols = columns_from_schema(load_schema(p["schema"]))
        for name, edges in (p["bins"] or {}).items():
            if name not in cols:
                raise ValueError(f"{self.name}: bins given for '{name}', which is not a numeric schema column")
            cols[name] = {**cols[name], "bins": list(edges)}
        return cols

    @property
    def names(self) -> list[str]:
        return self.discretizer.names

    # -- privacy plan ------------------------------------------------------------------------
    def _plan(self, n_rows: int, budget: Budget) -> tuple[dict[str, Any], list[Event]]:
        plan = plan_mst(len(self.names), budget.epsilon, budget.delta)
        return {"scale": plan.scale, "sigma_1way": plan.sigma_1way, "sigma_2way": plan.sigma_2way,
                "epsilon_select": plan.epsilon_select}, plan.events()

    def plan(self, n_rows: int, budget: Budget) -> list[Event]:
        """The planned events for `n_rows` (public n̂) under `budget`: data-independent (schema and ε, δ only)."""
        if n_rows < 1:
            raise ValueError(f"n_rows must be >= 1, got {n_rows}")
        info, events = self._plan(n_rows, budget)
        self.privacy = {"n_rows": int(n_rows), "epsilon": budget.epsilon, "delta": budget.delta,
                        "domain": dict(zip(self.names, self.discretizer.shape)), **info,
                        "events": [event_to_dict(e) for e in events]}
        return events

    # -- training ----------------------------------------------------------------------------
    def fit(self, X: Any, session: BudgetSession, budget: Budget | None = None) -> None:
        """Reserve the plan (from len(X) = public n̂), then read X, run the mechanism, record the actual events."""
        reserve_plan(self, len(X), session, budget)
        data = np.asarray(X, dtype=np.float32)
        check_encoded(self.name, self.layout, data,
                      " (MST discretises encoded values by the schema's public bins, which cover [0, 1])")
        codes = self.discretizer.codes(data)
        priv, p = self.privacy, self.params
        rng = numpy_noise_rng(p["noise_seed"], f"{self.name}:mechanism",
                              private=math.isfinite(priv["epsilon"]), seed=p["seed"])
        events = self._run(codes, rng)
        session.record(events)

    def _run(self, codes: np.ndarray, rng: np.random.Generator) -> list[Event]:
        priv, p = self.privacy, self.params
        from pipelines.marginal.mst import MSTPlan
        plan = MSTPlan(priv["scale"], priv["sigma_1way"], priv["sigma_2way"], priv["epsilon_select"], len(self.names))
        report(self.name, 0, 1)
        self.model, events, edges = run_mst(codes, self.discretizer.shape, self.names, plan, priv["n_rows"], rng,
                                            iters=int(p["iters"]), device=self._jax_device())
        self.structure = {"edges": [[self.names[i], self.names[j]] for i, j in edges]}
        report(self.name, 1, 1)
        return events

    def _jax_device(self) -> str:
        return "cuda" if self.device == "cuda" else "cpu"

    # -- sampling and persistence ------------------------------------------------------------
    def sample(self, n: int, seed: int) -> np.ndarray:
        """n encoded rows (float32, in [0, 1]): codes from the model, numeric bins decoded uniformly."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: fit() or load() first")
        if n <= 0:
            return np.zeros((0, self.layout.width), dtype=np.float32)
        codes = est.sample_codes(self.model, n, seed, self.names)
        return self.discretizer.decode(codes, np.random.default_rng([int(seed), 2]))

    def save(self, directory: Path) -> None:
        """Write <name>.npz (model potentials, no pickle) and <name>.json (params, layout, bins, privacy plan)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        model = est.save_model(self.model, directory, self.name)
        save_model(directory, self, {}, discretizer=self.discretizer.to_dict(), model=model, structure=self.structure)

    @classmethod
    def load(cls, directory: Path, device: str = "cpu"):
        meta = json.loads((Path(directory) / f"{cls.name}.json").read_text())
        layout = Layout.from_dict(meta["layout"])
        params = dict(meta["params"], schema=None, bins={})     # the saved bins are authoritative
        out = cls(layout, params, device)
        out.params = meta["params"]
        out.discretizer = Discretizer.from_dict(layout, meta["discretizer"])
        out.model = est.load_model(directory, cls.name, meta["model"], out._jax_device())
        out.structure, out.privacy = meta["structure"], meta["privacy"]
        if out.privacy is not None:
            out.privacy["epsilon"] = float(out.privacy["epsilon"])
            out.privacy["epsilon_select"] = float(out.privacy["epsilon_select"])
        return out
