"""Exact samplers for published noise: Bernoulli(e^−γ), discrete Laplace, discrete Gaussian, the exponential
mechanism, a private selection's trial count and candidates, and the exact lattice rounding that puts a
real-valued query on the integers they need; and DP-SGD's Poisson subsampling, exact in the same sense.

Why. Laplace by inverse CDF, Gaussians by `numpy`, the exponential mechanism by float
Gumbel-max: each maps a uniform float through floating-point functions, so the set of outputs that the noisy value
can take depends on the true value, and its low-order bits reveal it (Mironov 2012, "On significance of the least
significant bits for differential privacy"; the same holds for Gaussians and Gumbel-max). The samplers here draw
integers with exactly the probabilities the accountant assumes, so the released value x + Y (x an integer query,
Y an integer) carries nothing beyond the mechanism's distribution.

Exactness. Randomness comes only from the `np.random.Generator` passed in (`rng.integers`: the project's CSPRNG
behind NumPy's API, `pipelines/privacy/noise.py`), as uniform integers, which NumPy draws exactly (bounded
rejection). Every decision is exact in real arithmetic:
- `bernoulli_exp`, the one primitive with a transcendental probability, decides U < e^−γ for a uniform
  U = (u + V)/2⁵³ (u a uniform 53-bit integer, V ∈ [0, 1) the not yet drawn bits): it compares u against a float
  bracket [p_lo, p_hi] of e^−γ that contains it with margin (the caller bounds |γ̂ − γ| and the bracket widens
  by a relative 2⁻⁴⁰ on top of that, 10⁸ times NumPy's exp error), and decides only when u's whole interval lies
  on one side. Otherwise (probability ≈ 2⁻³⁸ per draw) it draws more bits of U and compares against rational
  bounds of e^−γ from exact integer arithmetic (`_exp_neg_bracket`) until the interval is on one side. So the
  result is 1 with probability exactly e^−γ, whatever the float error, and fast (vectorised) almost always.
- discrete Laplace: Canonne, Kamath & Steinke 2020 ("The Discrete Gaussian for Differential Privacy",
  NeurIPS; CKS20), Algorithm 2, for a rational scale t/s: P(y) ∝ exp(−|y|·s/t).
- discrete Gaussian: CKS20 Algorithm 3, P(y) ∝ exp(−y²/2σ²) on ℤ for σ² = Fraction(σ)² (the float σ the event
  records, as an exact rational), by rejection from the discrete Laplace of scale ⌊σ⌋ + 1.
- exponential mechanism: rejection from the uniform proposal, accepting r with probability e^{−ε(u* − u_r)/2Δ}
  (u* = max score), an exact Bernoulli; the accepted index has probability exactly ∝ exp(εu_r/2Δ).
Every loop is vectorised over the draws still pending (a batch of proposals, or of cells); the pending set shrinks
geometrically, so a call costs a few dozen NumPy operations whatever its size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

UNIFORM_BITS = 53  # bits of U drawn per Bernoulli in the fast path (a float's mantissa)
_SCALE = float(2**UNIFORM_BITS)
EXP_MARGIN = 2.0**-40  # relative widening of the float bracket of e^−γ (NumPy's exp: ≤ 4 ulp ≈ 2^-50)
TINY = 2.0**-1000  # absolute floor of the upper bracket (subnormal results of exp)
_MAX_INT64_STEP = 2**62
GEOMETRIC_BLOCK = 8  # Bernoulli(e^-1) draws per pending geometric draw and round


# -- exact bounds of e^−γ (the fallback) ---------------------------------------------------------------------
def _exp_fixed(f_num: int, f_den: int, w: int, upper: bool) -> int:
    """floor (upper: ceil + tail) of 2^w·e^f for a rational f = f_num/f_den in [0, 1], by the series Σ f^k/k!
    in fixed point, each term rounded down (up); the terms decrease at least geometrically by 1/2 after the
    first, so the omitted tail is below the last term kept (≤ 1 unit), which `upper` adds (+2 units)."""
    one = 1 << w
    total, term, k = one, one, 0
    while term:
        k += 1
        num = term * f_num
        den = f_den * k
        term = -(-num // den) if upper else num // den
        if upper and term <= 1:
            return total + term + 2
        total += term
    return total


def _mul(a: int, b: int, w: int, upper: bool) -> int:
    """floor (upper: ceil) of a·b/2^w."""
    p = a * b
    return (p >> w) + (1 if upper and p & ((1 << w) - 1) else 0)


def _e_power(n: int, w: int, upper: bool) -> int:
    """floor (upper: ceil) bound of 2^w·e^n (n ≥ 0) in fixed point, by squaring a bound of e with directed
    rounding: all factors are ≥ 1, so products of lower (upper) bounds stay lower (upper) bounds."""
    base = _exp_fixed(1, 1, w, upper)
    result = 1 << w
    while n:
        if n & 1:
            result = _mul(result, base, w, upper)
        n >>= 1
        if n:
            base = _mul(base, base, w, upper)
    return result


def _exp_neg_bracket(gamma: Fraction, precision: int) -> tuple[int, int]:
    """Integers (L, H) with L ≤ 2^precision·e^−γ ≤ H (γ ≥ 0 rational), H − L a few units.

    e^−γ = 1/(e^n·e^f), n = ⌊γ⌋, f = γ − n: lower and upper fixed-point bounds of e^γ with w guard bits (every
    rounding directed), then L = ⌊2^{p+w}/E_hi⌋, H = ⌈2^{p+w}/E_lo⌉. When e^−γ < 2^−(p+1) the bracket (0, 1)
    is returned without computing e^n (it is valid, and a caller that needs more asks for a higher precision)."""
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if gamma >= (precision + 1) * Fraction(7, 10):  # 0.7 > ln 2, so e^−γ ≤ 2^−(p+1)
        return 0, 1
    n = gamma.numerator // gamma.denominator
    f = gamma - n
    w = precision + 2 * max(n, 1).bit_length() + 24
    f_lo_num = (f.numerator << w) // f.denominator
    f_hi_num = -(-(f.numerator << w) // f.denominator)
    ef_lo = _exp_fixed(f_lo_num, 1 << w, w, upper=False)
    ef_hi = _exp_fixed(f_hi_num, 1 << w, w, upper=True)
    en_lo, en_hi = _e_power(n, w, upper=False), _e_power(n, w, upper=True)
    e_lo = (ef_lo * en_lo) >> w
    e_hi = -(-(ef_hi * en_hi) >> w)
    top = 1 << (precision + w)
    return top // e_hi, -(-top // e_lo)


def _exact_less(rng: np.random.Generator, u: int, gamma: Fraction) -> bool:
    """Whether U < e^−γ for U uniform on [u/2^53, (u + 1)/2^53): more bits of U are drawn (64 at a time) and
    compared with ever tighter exact bounds of e^−γ until U's interval lies on one side."""
    a, k = int(u), UNIFORM_BITS  # U ∈ [a/2^k, (a + 1)/2^k)
    while True:
        p = k + 32
        lo, hi = _exp_neg_bracket(gamma, p)  # lo/2^p ≤ e^−γ ≤ hi/2^p
        if (a + 1) << (p - k) <= lo:
            return True
        if a << (p - k) >= hi:
            return False
        a = (a << 64) | int(rng.integers(0, 2**64, dtype=np.uint64))
        k += 64


# -- the one transcendental primitive ------------------------------------------------------------------------
def bernoulli_exp(
    rng: np.random.Generator, gamma_hat: np.ndarray, gamma_err: np.ndarray, exact_gamma: Callable[[int], Fraction]
) -> np.ndarray:
    """Independent Bernoulli(e^−γ_i) draws, exactly (module docstring).

    `gamma_hat`: float estimates of γ_i ≥ 0; `gamma_err`: bounds on |γ̂_i − γ_i| that the caller guarantees (a
    wrong bound could bias the result; every caller here bounds its float error with a factor ≥ 32 to spare);
    `exact_gamma(i)`: γ_i as an exact Fraction, called only for the rare draws the floats cannot decide."""
    g = np.asarray(gamma_hat, dtype=np.float64).ravel()
    err = np.asarray(gamma_err, dtype=np.float64).ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        p_lo = np.exp(-(g + err)) * (1.0 - EXP_MARGIN)
        p_hi = np.exp(-np.maximum(g - err, 0.0)) * (1.0 + EXP_MARGIN) + TINY
    u = rng.integers(0, 2**UNIFORM_BITS, size=g.size, dtype=np.int64)
    uf = u.astype(np.float64)  # exact: u < 2^53
    yes = (uf + 1.0) <= p_lo * _SCALE  # U < (u + 1)/2^53 ≤ p_lo ≤ e^−γ
    no = uf >= p_hi * _SCALE  # U ≥ u/2^53 ≥ p_hi ≥ e^−γ
    out = yes.copy()
    for i in np.flatnonzero(~(yes | no)):  # ≈ 2^-38 of the draws, or where the floats are NaN
        out[i] = _exact_less(rng, int(u[i]), Fraction(exact_gamma(int(i))))
    return out


def _uniform_below(rng: np.random.Generator, bound: int, n: int) -> np.ndarray:
    """n uniform integers in [0, bound) (exact: NumPy's bounded integers; bound < 2^62)."""
    if not 0 < bound < _MAX_INT64_STEP:
        raise ValueError(f"uniform bound must lie in (0, 2^62), got {bound}")
    return rng.integers(0, bound, size=n, dtype=np.int64)


def _geometric_exp1(rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws of V = the number of successes of Bernoulli(e^−1) before the first failure: P(V = v) ∝ e^−v.
    Bernoullis are drawn in blocks of GEOMETRIC_BLOCK per pending draw (the ones after its first failure are
    discarded, which leaves V's law unchanged); a draw continues only if its whole block succeeded (e^−8)."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    one = Fraction(1)
    columns = np.arange(GEOMETRIC_BLOCK)
    while active.size:
        m = active.size * GEOMETRIC_BLOCK
        ok = bernoulli_exp(rng, np.ones(m), np.zeros(m), lambda i: one).reshape(active.size, GEOMETRIC_BLOCK)
        leading = np.where(ok, GEOMETRIC_BLOCK, columns).min(axis=1)  # index of the first failure
        v[active] += leading
        active = active[leading == GEOMETRIC_BLOCK]
    return v


def logarithmic_trials(rng: np.random.Generator, gamma: Fraction) -> int:
    """T on {1, 2, ...} with P(T = t) = (1 − γ)^t / (t·ln(1/γ)), γ = `gamma` in (0, 1] (γ = 1: T = 1): the logarithmic
    law, Papernot & Steinke's truncated negative binomial of shape η = 0 (`RepeatAndSelectEvent`'s trial count).
    Exactly, by rejection: a proposal t ~ Geometric(γ) on {1, 2, ...} (Bernoulli(γ) draws up to the first success,
    each a uniform integer below γ's denominator being below its numerator), P(t) = γ(1 − γ)^{t−1}, is accepted
    with probability 1/t (a uniform integer below t being 0), so P(T = t) ∝ (1 − γ)^{t−1}/t ∝ (1 − γ)^t / t."""
    if not isinstance(gamma, Fraction) or not 0 < gamma <= 1:
        raise ValueError(f"the logarithmic law's gamma must be a Fraction in (0, 1], got {gamma!r}")
    if gamma.denominator >= _MAX_INT64_STEP:
        raise ValueError(f"gamma {gamma} has too fine a rational value (denominator >= 2^62)")
    while True:
        t = 1
        while int(_uniform_below(rng, gamma.denominator, 1)[0]) >= gamma.numerator:
            t += 1
        if uniform_index(rng, t) == 0:
            return t


def uniform_index(rng: np.random.Generator, k: int) -> int:
    """One uniform integer in [0, k), exactly (a private selection's candidate of one trial)."""
    return int(_uniform_below(rng, int(k), 1)[0])


def kept_indices(draw_bytes: Callable[[int], np.ndarray], n: int, rate: float) -> np.ndarray:
    """The indices i in range(n) with U_i < `rate`, for independent uniforms U_i in [0, 1): each index kept
    independently with probability exactly `rate` (the float's value, a dyadic rational; Poisson sampling).

    U_i's binary expansion is drawn a byte at a time, only as far as it ties with `rate`'s: the first byte decides
    every index but those whose byte equals rate's first byte (1/256 of them), the next byte those, and so on; when
    `rate`'s expansion ends, a U_i that tied on every byte is ≥ `rate`. So the law is exactly Bernoulli(rate) per
    index, as comparing an infinitely precise U_i would give, at one byte of randomness per index (a float draw
    per index, `random() < rate`, takes eight). `draw_bytes(k)` returns k uniform bytes (uint8)."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"sample_rate must lie in (0, 1], got {rate}")
    if rate == 1.0:
        return np.arange(n, dtype=np.int64)
    digits, frac = [], Fraction(rate)
    while frac:  # rate's base-256 expansion (finite: rate is dyadic)
        frac *= 256
        digits.append(int(frac))
        frac -= int(frac)
    kept: list[np.ndarray] = []
    pending = np.arange(n, dtype=np.int64)
    for digit in digits:
        if not pending.size:
            break
        byte = draw_bytes(pending.size)
        kept.append(pending[byte < digit])  # U_i < rate, decided at this byte
        pending = pending[byte == digit]  # tied so far: the next byte decides
    return np.sort(np.concatenate(kept)) if kept else np.zeros(0, dtype=np.int64)


# -- discrete Laplace ----------------------------------------------------------------------------------------
def _rational(x: float | int | Fraction, what: str) -> Fraction:
    value = Fraction(x)
    if not value > 0:
        raise ValueError(f"{what} must be positive, got {x}")
    return value


def _fill(size: int, propose: Callable[[int], np.ndarray], rate: float) -> np.ndarray:
    """`size` draws from a rejection sampler: `propose(m)` returns the accepted values among m i.i.d. candidates,
    in candidate order. Every accepted value has the target law and acceptance is independent across candidates,
    so the first `size` accepted values (over rounds of ≈ remaining/rate candidates) are i.i.d. from it; the
    oversizing only saves rounds."""
    out = np.zeros(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        got = propose(int(need / rate * 1.15) + 16)[:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out


def discrete_laplace(rng: np.random.Generator, scale: float | int | Fraction, size: int) -> np.ndarray:
    """`size` i.i.d. draws of the discrete Laplace Lap_ℤ(b), P(y) = (1 − e^{−1/b})/(1 + e^{−1/b})·e^{−|y|/b},
    b = `scale` (a float is taken as its exact rational value), as int64 (CKS20, Algorithm 2 with b = t/s)."""
    b = _rational(scale, "scale")
    t, s = b.numerator, b.denominator
    if t >= _MAX_INT64_STEP:
        raise ValueError(f"discrete Laplace scale {scale} too large (numerator ≥ 2^62)")
    t_f = float(t)

    def propose(m: int) -> np.ndarray:
        uu = _uniform_below(rng, t, m)
        g = uu.astype(np.float64) / t_f  # U/t, relative error ≤ 3·2^-53
        uu = uu[bernoulli_exp(rng, g, g * 2.0**-46, lambda i: Fraction(int(uu[i]), t))]
        v = _geometric_exp1(rng, uu.size)
        if uu.size and int(v.max()) >= _MAX_INT64_STEP // t:  # never in practice: exact Python ints
            y = np.array([(int(a) + t * int(c)) // s for a, c in zip(uu, v)], dtype=object)
            if any(abs(int(yi)) >= _MAX_INT64_STEP for yi in y):
                raise OverflowError("discrete Laplace draw beyond int64")
            y = y.astype(np.int64)
        else:
            y = (uu + t * v) // s
        neg = rng.integers(0, 2, size=uu.size, dtype=np.int64).astype(bool)
        ok = ~(neg & (y == 0))  # reject "−0" (it would double P(0))
        return np.where(neg, -y, y)[ok]

    return _fill(size, propose, 0.5)


# -- discrete Gaussian ---------------------------------------------------------------------------------------
def discrete_gaussian(rng: np.random.Generator, sigma: float | Fraction, size: int) -> np.ndarray:
    """`size` i.i.d. draws of the discrete Gaussian N_ℤ(0, σ²), P(y) ∝ exp(−y²/2σ²) on ℤ, σ² = Fraction(σ)²
    exactly (CKS20, Algorithm 3: Y ~ Lap_ℤ(t), t = ⌊σ⌋ + 1, accepted with probability exp(−(|Y| − σ²/t)²/2σ²)).
    Not truncated: its Rényi divergences are those of CKS20 (Prop. 5), which the zCDP and RDP accounting use."""
    sig = _rational(sigma, "sigma")
    s2 = sig * sig
    t = int(sig) + 1
    s2_f = float(s2)
    c_f = s2_f / t

    def propose(m: int) -> np.ndarray:
        y = discrete_laplace(rng, t, m)
        ay = np.abs(y).astype(np.float64)
        x = ay - c_f
        g = x * x / (2.0 * s2_f)
        # |γ̂ − γ| ≤ 2^-51·((|Y| + c)²/σ² + γ) (rounding of σ², σ²/t, the subtraction, square and division):
        err = 2.0**-44 * ((ay + c_f) ** 2 / s2_f + g + 1.0)
        return y[bernoulli_exp(rng, g, err, lambda i: (abs(int(y[i])) - s2 / t) ** 2 / (2 * s2))]

    return _fill(size, propose, 0.5)


# -- the exponential mechanism -------------------------------------------------------------------------------
def exponential_index(rng: np.random.Generator, scores: np.ndarray, sensitivity: float, epsilon: float) -> int:
    """Index r with probability exactly exp(ε·u_r/2Δ) / Σ_s exp(ε·u_s/2Δ) (u = `scores`, floats taken as their
    exact rational values; Δ = `sensitivity`).

    Rejection from the uniform proposal: draw r uniformly, accept with probability e^{−γ_r},
    γ_r = ε(u* − u_r)/2Δ ≥ 0 (u* = max_s u_s), by `bernoulli_exp`; P(output r) ∝ (1/R)·e^{−γ_r} ∝ exp(εu_r/2Δ).
    Proposals are drawn in batches and the first accepted one in draw order is returned, which is the sequential
    sampler's output. Expected proposals: R/Σ_r e^{−γ_r} ≤ R (one batch of ≈ 1.5× that)."""
    u = np.asarray(scores, dtype=np.float64)
    n = u.size
    top = float(u.max())
    c = float(epsilon) / (2.0 * float(sensitivity))
    g = c * (top - u)
    err = 2.0**-44 * (c * (abs(top) + np.abs(u)) + g)  # float rounding of ε/2Δ, u* − u_r and the product
    exact_c = Fraction(epsilon) / (2 * Fraction(sensitivity))
    exact_top = Fraction(top)
    expected = n / float(np.exp(-g).sum())  # only sizes the batches
    batch = int(min(max(16, math.ceil(1.5 * expected)), 1 << 16))
    while True:
        r = _uniform_below(rng, n, batch)
        ok = bernoulli_exp(rng, g[r], err[r], lambda i: exact_c * (exact_top - Fraction(float(u[r[i]]))))
        hits = np.flatnonzero(ok)
        if hits.size:
            return int(r[hits[0]])


# -- exact lattice rounding ----------------------------------------------------------------------------------
def lattice_round(values: np.ndarray, unit: Fraction | float) -> np.ndarray:
    """⌊v/unit + 1/2⌋ for every float v, exactly (round half up; `unit` > 0 rational), as int64.

    Exactness makes the map monotone and equivariant under integer shifts, so if |v − v'| ≤ k·unit then
    |round(v) − round(v')| ≤ k: an L∞ bound in the query's units becomes an integer bound in lattice units
    without loss (`pipelines.privacy.mechanisms.lattice_gaussian_mechanism`). Float division decides all values
    away from a half-integer; the others are rounded in rational arithmetic."""
    q = _rational(unit, "lattice unit")
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("lattice_round needs finite values")
    z = v / float(q) + 0.5
    if np.abs(z).max(initial=0.0) >= 2.0**52:
        raise OverflowError("value too large for the lattice")
    out = np.floor(z)
    frac = z - out
    tol = np.abs(z) * 2.0**-45 + 2.0**-40  # ≥ 32× the float error of z (≤ |z|·2^-50)
    close = (frac < tol) | (frac > 1 - tol)
    out = out.astype(np.int64)
    flat = out.reshape(-1)
    for i in np.flatnonzero(close.reshape(-1)):
        e = Fraction(float(v.reshape(-1)[i])) / q + Fraction(1, 2)
        flat[i] = e.numerator // e.denominator
    return out
