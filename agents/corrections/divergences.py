"""Divergences between Gaussians: closed-form KL and a deterministic Monte Carlo JSD.

Every function is batched over leading dimensions and never raises on a
degenerate input: a covariance that is not positive definite yields ``inf``
(maximal divergence), which callers map to the smallest weight.

The Jensen-Shannon divergence between Gaussians has no closed form, so it is
estimated with *common random numbers*: a fixed set of standard normal base
samples, made once from a fixed seed, is reused for every call. The estimate
is therefore a deterministic, smooth function of its inputs, exactly 0 for
identical distributions and exactly symmetric in its arguments.

Two choices make 128 samples per distribution more accurate than 512 plain
Monte Carlo samples (``benchmarks/jsd_accuracy.py`` measures both):

- the base samples are a scrambled Sobol sequence mapped through the normal
  quantile function (randomised quasi-Monte Carlo), not independent draws;
- each sample contributes the mixture form of the integrand, ln 2 − H(p/(p+q))
  with H the binary entropy, which lies in [0, ln 2] (the Rao-Blackwellised
  form of the textbook ln 2 − softplus(log q − log p), which is unbounded below).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal, get_args

import torch
from torch import Tensor

Divergence = Literal["jsd", "symkl", "kl"]
DIVERGENCES: tuple[str, ...] = get_args(Divergence)
"""The divergences, in the order benchmarks and tests list them: read off ``Divergence``."""

JSD_SAMPLES = 128
"""Base samples per distribution for the Monte Carlo JSD (a power of two, as Sobol points want)."""

_BASE_SEED = 0x0FF_90C
LOG2 = math.log(2.0)
"""ln 2, the largest Jensen-Shannon divergence in nats."""
_U_MIN = 2.0**-40
"""Sobol coordinates are kept inside [2⁻⁴⁰, 1 − 2⁻⁴⁰], so no base sample is infinite."""


@lru_cache(maxsize=64)
def base_normals(dim: int, n: int = JSD_SAMPLES, device: str = "cpu", dtype: torch.dtype = torch.float64) -> Tensor:
    """Fixed standard normal base samples, shape (n, dim), identical on every call.

    The first ``n`` points of a scrambled Sobol sequence in [0, 1)^dim, mapped
    through the standard normal quantile function. A constant table, not RNG
    state: the scrambling has its own fixed seed, so results never depend on
    the global torch RNG.
    """
    sobol = torch.quasirandom.SobolEngine(dim, scramble=True, seed=_BASE_SEED + dim)
    uniform = sobol.draw(n, dtype=torch.float64).clamp(_U_MIN, 1.0 - _U_MIN)
    return torch.special.ndtri(uniform).to(device=device, dtype=dtype)


def safe_cholesky(cov: Tensor) -> tuple[Tensor, Tensor]:
    """Lower Cholesky factor and a mask of the batch entries that factorised.

    Never raises and never synchronises with the host: failed entries get the
    identity as factor, so later arithmetic stays finite, and the mask says which.
    """
    chol, info = torch.linalg.cholesky_ex(cov)
    ok = (info == 0) & torch.isfinite(chol).all(dim=-1).all(dim=-1)
    # Replace failed factors by the identity so later solves stay finite; the
    # mask turns their divergence into inf afterwards.
    eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
    chol = torch.where(ok[..., None, None], chol, eye)
    return chol, ok


def _half_logdet(chol: Tensor) -> Tensor:
    return chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def gaussian_kl(mean_p: Tensor, cov_p: Tensor, mean_q: Tensor, cov_q: Tensor) -> Tensor:
    """KL(N(mean_p, cov_p) || N(mean_q, cov_q)) in closed form.

    Args:
        mean_p, mean_q: (..., d) means.
        cov_p, cov_q: (..., d, d) symmetric positive definite covariances.

    Returns:
        (...) divergences; ``inf`` where a covariance is not positive definite.
    """
    chol_p, ok_p = safe_cholesky(cov_p)
    chol_q, ok_q = safe_cholesky(cov_q)
    d = mean_p.shape[-1]
    # tr(cov_q^-1 cov_p) = ||L_q^-1 L_p||_F^2
    m = torch.linalg.solve_triangular(chol_q, chol_p, upper=False)
    trace = m.square().sum((-2, -1))
    diff = (mean_q - mean_p).unsqueeze(-1)
    maha = torch.linalg.solve_triangular(chol_q, diff, upper=False).square().sum((-2, -1))
    logdet = 2.0 * (_half_logdet(chol_q) - _half_logdet(chol_p))
    kl = 0.5 * (trace + maha - d + logdet)
    kl = torch.where(ok_p & ok_q, kl, torch.full_like(kl, math.inf))
    return torch.nan_to_num(kl, nan=math.inf, posinf=math.inf).clamp_min(0.0)


def gaussian_jsd(mean_p: Tensor, cov_p: Tensor, mean_q: Tensor, cov_q: Tensor, n_samples: int = JSD_SAMPLES) -> Tensor:
    """Jensen-Shannon divergence between full-covariance Gaussians, in [0, ln 2].

    Monte Carlo with common random numbers: with fixed base samples z,
    x_P = mean_p + L_p z and x_Q = mean_q + L_q z, and M = (P + Q)/2,

        JSD = E_M[ln 2 − H(p/(p+q))] = 1/2 E_P[ln 2 − H] + 1/2 E_Q[ln 2 − H]

    with H the binary entropy in nats (see :func:`jsd_from_log_ratios`).

    Args:
        mean_p, mean_q: (..., d); cov_p, cov_q: (..., d, d).

    Returns:
        (...) estimates; ``ln 2`` where a covariance is not positive definite.
    """
    d = mean_p.shape[-1]
    z = base_normals(d, n_samples, str(mean_p.device), mean_p.dtype)  # (K, d)
    chol_p, ok_p = safe_cholesky(cov_p)
    chol_q, ok_q = safe_cholesky(cov_q)
    half_zz = 0.5 * z.square().sum(-1)  # (K,)

    def log_ratio_at(mean_a: Tensor, chol_a: Tensor, mean_b: Tensor, chol_b: Tensor) -> Tensor:
        """log b(x) - log a(x) at x = mean_a + L_a z, shape (..., K)."""
        # L_b^-1 (x - mean_b) = L_b^-1 (mean_a - mean_b) + (L_b^-1 L_a) z
        shift = torch.linalg.solve_triangular(chol_b, (mean_a - mean_b).unsqueeze(-1), upper=False)  # (..., d, 1)
        scale = torch.linalg.solve_triangular(chol_b, chol_a, upper=False)  # (..., d, d)
        w = shift + scale @ z.T  # (..., d, K)
        return half_zz - 0.5 * w.square().sum(-2) + (_half_logdet(chol_a) - _half_logdet(chol_b))[..., None]

    log_ratios = torch.stack(
        [log_ratio_at(mean_p, chol_p, mean_q, chol_q), log_ratio_at(mean_q, chol_q, mean_p, chol_p)]
    )
    jsd = jsd_from_log_ratios(log_ratios)
    return torch.where(ok_p & ok_q, jsd, torch.full_like(jsd, LOG2))


def jsd_from_log_ratios(log_ratios: Tensor) -> Tensor:
    """JSD from stacked log ratios, shape (2, ..., K): log q/p at P's samples, log p/q at Q's.

    At each sample x, with r = log q(x) − log p(x) and s = p/(p+q) = σ(−r), the
    integrand is ln 2 − H(s), H(s) = −s ln s − (1 − s) ln(1 − s). H is symmetric
    in r, so with a = |r| and t = σ(−a) ∈ (0, ½]: H = −ln(1 − t) + a·t, which
    is stable for every r (t never rounds to 1).
    """
    a = log_ratios.abs()
    t = torch.sigmoid(a.neg())
    entropy = torch.log1p(t.neg()).neg_().addcmul_(a, t)
    # ln 2 − ½(mean_P H + mean_Q H), exactly symmetric: the sum over two terms is a + b == b + a.
    jsd = torch.rsub(entropy.mean(-1).sum(0), LOG2, alpha=0.5)
    # A non-finite estimate only comes from non-finite inputs: call it maximal.
    return jsd.nan_to_num_(nan=LOG2, posinf=LOG2, neginf=LOG2).clamp_(0.0, LOG2)


def diag_gaussian_kl(mean_p: Tensor, log_std_p: Tensor, mean_q: Tensor, log_std_q: Tensor) -> Tensor:
    """KL between diagonal Gaussians over the last dimension jointly, shape (...)."""
    var_ratio = torch.exp(2.0 * (log_std_p - log_std_q))
    maha = ((mean_p - mean_q) * torch.exp(-log_std_q)).square()
    kl = 0.5 * (var_ratio + maha - 1.0).sum(-1) + (log_std_q - log_std_p).sum(-1)
    return torch.nan_to_num(kl, nan=math.inf, posinf=math.inf).clamp_min(0.0)


def quadratic_basis(z: Tensor) -> Tensor:
    """Rows [1, z, z², ½|z|²] of samples z (K, d), shape (2·d + 2, K)."""
    rows = [torch.ones(1, z.shape[0], dtype=z.dtype, device=z.device), z.T, z.square().T]
    rows.append(0.5 * z.square().sum(-1, keepdim=True).T)
    return torch.cat(rows)


@lru_cache(maxsize=64)
def _diag_basis(dim: int, n: int, device: str, dtype: torch.dtype) -> Tensor:
    """:func:`quadratic_basis` of the base samples, built in float64 and cached."""
    return quadratic_basis(base_normals(dim, n, device, torch.float64)).to(dtype)


def diag_log_ratios(mean_p: Tensor, log_std_p: Tensor, mean_q: Tensor, log_std_q: Tensor, basis: Tensor) -> Tensor:
    """Log density ratios at every sample, shape (2, ..., K), for :func:`jsd_from_log_ratios`.

    ``basis`` is :func:`quadratic_basis` of the samples z; the result has its
    dtype. At x = mean_a + std_a ∘ z, with a = (mean_a − mean_b)/std_b and
    b = std_a/std_b,

        log b(x) − log a(x) = Σ(log std_a − log std_b) − ½|a|² − (a∘b)·z − ½ b²·z² + ½|z|²,

    so every sample's log ratio, in both directions, comes out of one matrix
    product with the basis: O(B·K·d) multiply-adds.
    """

    def coefficients(mean_a: Tensor, log_std_a: Tensor, mean_b: Tensor, log_std_b: Tensor) -> Tensor:
        inv_std_b = torch.exp(-log_std_b)
        a = (mean_a - mean_b) * inv_std_b
        b = torch.exp(log_std_a) * inv_std_b
        const = (log_std_a - log_std_b).sum(-1, keepdim=True) - 0.5 * a.square().sum(-1, keepdim=True)
        return torch.cat([const, -a * b, -0.5 * b.square(), torch.ones_like(const)], dim=-1)

    coeffs = torch.stack(
        [coefficients(mean_p, log_std_p, mean_q, log_std_q), coefficients(mean_q, log_std_q, mean_p, log_std_p)]
    )
    # One 2-D product (a batched matmul with an 8-wide inner dimension is several times slower).
    flat = coeffs.to(basis.dtype).reshape(-1, coeffs.shape[-1]) @ basis
    return flat.reshape(*coeffs.shape[:-1], basis.shape[-1])


def diag_gaussian_jsd(
    mean_p: Tensor,
    log_std_p: Tensor,
    mean_q: Tensor,
    log_std_q: Tensor,
    n_samples: int = JSD_SAMPLES,
    sample_dtype: torch.dtype | None = None,
) -> Tensor:
    """JSD between diagonal Gaussians jointly over the last dimension, shape (...).

    The same estimator as :func:`gaussian_jsd` (same base samples, so the two
    agree for diagonal covariances), with the log ratios of
    :func:`diag_log_ratios`. ``sample_dtype`` (default: the inputs') sets the
    precision of the (2, ..., K) pass; the coefficients use the inputs' dtype.
    """
    basis = _diag_basis(mean_p.shape[-1], n_samples, str(mean_p.device), sample_dtype or mean_p.dtype)
    log_ratios = diag_log_ratios(mean_p, log_std_p, mean_q, log_std_q, basis)
    return jsd_from_log_ratios(log_ratios).to(mean_p.dtype)
