"""A declared privacy unit to test with: the visits schema (several rows per patient, at most 3 kept), its seeded
rows, and the key of the keyed contribution bound."""

from __future__ import annotations

import numpy as np
import pandas as pd

KEY = bytes(range(32))  # the steward key of the keyed contribution bound
VISITS = """
name: visits
description: clinic visits, several per patient
source: {documentation: "test fixture"}
privacy_unit: {column: patient_id, max_rows: 3}
population: clinic-patients
target: readmitted
columns:
  patient_id: {kind: id}
  age: {kind: integer, lower: 0, upper: 120}
  ward: {kind: categorical, categories: [a, b, c]}
  readmitted: {kind: binary, categories: ["no", "yes"]}
"""


def visits(n_patients: int, rows_of=lambda i: 1 + i % 7, seed: int = 0) -> pd.DataFrame:
    """Seeded visit rows of VISITS: patient i has rows_of(i) rows (1-7 by default, over the bound of 3)."""
    rng = np.random.default_rng(seed)
    ids = [f"P{i:04d}" for i in range(n_patients) for _ in range(rows_of(i))]
    return pd.DataFrame(
        {
            "patient_id": ids,
            "age": rng.integers(0, 121, len(ids)),
            "ward": rng.choice(list("abc"), len(ids)),
            "readmitted": rng.choice(["no", "yes"], len(ids)),
        }
    )
