"""Long code lists: a categorical column of more than LONG_LIST_ABOVE documented codes (a diagnosis list,
postcodes, `categories_file`) as BUCKETS buckets of consecutive codes in the schema's order.

Code k of K goes to bucket b(k) = ⌊k·B / K⌋ (B = min(BUCKETS, K)), so bucket b holds the codes
[⌈b·K / B⌉, ⌈(b + 1)·K / B⌉): every bucket is non-empty, their sizes differ by at most one, and codes a
documented list puts side by side (a chapter of a diagnosis list, a district of postcodes) share a bucket. The map is a
function of K alone, never of rows: it costs no privacy budget.

Users: the deep generators' encoding (`pipelines.data.bins.BinnedEncoding`: a long list as its bucket, one-hot,
plus the code's place inside the bucket) and the evaluation's features (`pipelines.evaluation.utility.featurise`:
thousands of one-hot columns make a classifier's fit far too slow). MST and AIM keep every code and compress the
domain by their own noisy counts instead (`pipelines.marginal.compress`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

LONG_LIST_ABOVE = 100  # a categorical column of more categories is a long code list
BUCKETS = 64  # buckets of a long code list


def is_long(n_categories: int) -> bool:
    """Whether a categorical column of `n_categories` documented categories is a long code list."""
    return n_categories > LONG_LIST_ABOVE


@dataclass(frozen=True)
class CodeBuckets:
    """The buckets of a list of `size` codes (module docstring)."""

    size: int

    @property
    def count(self) -> int:
        """The number of buckets B."""
        return min(BUCKETS, self.size)

    @cached_property
    def bucket(self) -> np.ndarray:
        """b(k) for every code k (int64)."""
        return np.arange(self.size, dtype=np.int64) * self.count // self.size

    @cached_property
    def starts(self) -> np.ndarray:
        """The first code of each bucket, and `size` after the last (int64, B + 1 values)."""
        return np.searchsorted(self.bucket, np.arange(self.count + 1)).astype(np.int64)

    def offsets(self, codes: np.ndarray) -> np.ndarray:
        """Each code's place inside its bucket as a number in (0, 1): the middle of its 1/m-wide slot, m the
        bucket's size (so `codes_at` gives it back)."""
        codes = np.asarray(codes, dtype=np.int64)
        b = self.bucket[codes]
        return (codes - self.starts[b] + 0.5) / (self.starts[b + 1] - self.starts[b])

    def codes_at(self, buckets: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The code at place `offsets` (clipped into [0, 1]) of bucket `buckets`: the ⌊o·m⌋-th code of the bucket
        (the last for o = 1)."""
        b = np.asarray(buckets, dtype=np.int64)
        m = self.starts[b + 1] - self.starts[b]
        rank = np.minimum(np.floor(np.clip(offsets, 0.0, 1.0) * m).astype(np.int64), m - 1)
        return self.starts[b] + rank
