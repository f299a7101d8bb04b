"""``gaussian_kde``: a Gaussian kernel density estimate, as ``jax.scipy.stats.gaussian_kde``.

The data are whitened once by the Cholesky factor of the kernel's precision, so a density is
one matrix of squared distances (points by data) reduced by a sum or, for ``logpdf``, by a
logsumexp: no per-point loop, so it compiles as any other pypto code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pypto.core.errors import ShapeError
from pypto.eager import random as prandom
from pypto.ops import (
    api,
    atleast_1d,
    atleast_2d,
    cholesky,
    composite,
    cov,
    inv,
    logsumexp,
    ndtr,
    searchsorted,
    solve,
    take,
)
from pypto.ops.api import promote


class gaussian_kde:
    """A Gaussian kernel density estimate of ``dataset`` (``[d, n]``: ``n`` points in ``d``
    dimensions, or ``[n]`` in one), with ``bw_method`` ``"scott"`` (default),
    ``"silverman"``, a number or a function of the estimate, and optional ``weights``; as
    ``jax.scipy.stats.gaussian_kde``. ``resample`` takes an integer seed (pypto's random
    numbers), where JAX takes a key.

    >>> import pypto as pto
    >>> kde = gaussian_kde(pto.tensor([0.0, 1.0, 1.5, 3.0]))
    >>> kde.evaluate(pto.tensor([1.0, 10.0])).numpy().round(4)
    array([0.2685, 0.    ], dtype=float32)
    """

    def __init__(
        self,
        dataset: Any,
        bw_method: str | float | Callable[..., Any] | None = None,
        weights: Any = None,
    ) -> None:
        data: Any = atleast_2d(api.asvalue(dataset, "gaussian_kde"))
        w: Any
        if math.prod(data.shape) <= 1:
            raise ShapeError("dataset should have multiple elements", op="gaussian_kde")
        d, n = data.shape
        if weights is not None:
            data, w = promote("gaussian_kde", (data, weights), inexact=True)
            w = atleast_1d(w)
            if len(w.shape) != 1 or w.shape[0] != n:
                raise ShapeError(
                    f"weights of shape {tuple(w.shape)} for {n} points: one weight per point",
                    op="gaussian_kde",
                )
            w = api.div(w, api.sum(w))
        else:
            (data,) = promote("gaussian_kde", (data,), inexact=True)
            w = api.broadcast_to(api.asvalue(np.asarray(1.0 / n, data.dtype.np)), (n,))
        self.dataset: Any = data
        self.weights: Any = w
        self.neff = api.div(1.0, api.sum(api.mul(w, w)))
        method = "scott" if bw_method is None else bw_method
        if method == "scott":
            factor: Any = api.pow(self.neff, -1.0 / (d + 4))
        elif method == "silverman":
            factor = api.pow(api.mul(self.neff, (d + 2) / 4.0), -1.0 / (d + 4))
        elif isinstance(method, int | float):
            factor = method
        elif callable(method):
            factor = method(self)
        else:
            raise ShapeError(
                f"bw_method {method!r} is not supported",
                op="gaussian_kde",
                hint="pass 'scott', 'silverman', a number or a function of the estimate",
            )
        data_cov = atleast_2d(cov(data, rowvar=True, bias=False, aweights=w))
        f2 = api.mul(factor, factor)
        self.covariance = api.mul(data_cov, f2)
        self.inv_cov = api.div(inv(data_cov), f2)

    @property
    def d(self) -> int:
        """The data's dimension."""
        return int(self.dataset.shape[0])

    @property
    def n(self) -> int:
        """The number of data points."""
        return int(self.dataset.shape[1])

    def _points(self, points: Any) -> Any:
        p: Any = atleast_2d(api.asvalue(points, "gaussian_kde"))
        if p.shape[0] != self.d:
            if p.shape[0] == 1 and p.shape[1] == self.d:
                return api.reshape(p, (self.d, 1))
            raise ShapeError(
                f"points have dimension {p.shape[0]}, the dataset has dimension {self.d}",
                op="gaussian_kde",
            )
        return p

    def _log_kernels(self, points: Any) -> Any:
        """``log_norm - |L(x - xᵢ)|²/2`` for each point (rows) and datum (columns), with
        ``L`` the Cholesky factor of the kernel's precision."""
        x, data, prec = promote(
            "gaussian_kde", (self._points(points), self.dataset, self.inv_cov), inexact=True
        )
        white = cholesky(prec)
        xs = api.matmul(composite.swapaxes(x, 0, 1), white)  # [m, d]
        ds = api.matmul(composite.swapaxes(data, 0, 1), white)  # [n, d]
        diag = composite.diagonal(white)
        log_norm = api.sub(api.sum(api.log(diag)), 0.5 * self.d * math.log(2 * math.pi))
        diff = api.sub(composite.expand_dims(xs, 1), composite.expand_dims(ds, 0))
        return api.sub(log_norm, api.mul(api.sum(api.mul(diff, diff), -1), 0.5))

    def evaluate(self, points: Any) -> Any:
        """The density at ``points`` (``[d, m]``, or ``[m]`` in one dimension)."""
        return api.sum(api.mul(api.exp(self._log_kernels(points)), self.weights), -1)

    __call__ = evaluate
    pdf = evaluate

    def logpdf(self, points: Any) -> Any:
        """The log-density at ``points``, as a logsumexp (no underflow far from the data)."""
        return logsumexp(api.add(self._log_kernels(points), api.log(self.weights)), -1)

    def integrate_gaussian(self, mean: Any, covariance: Any) -> Any:
        """The integral of the product of the estimate and the Gaussian ``N(mean, cov)``."""
        m = atleast_1d(composite.squeeze(api.asvalue(mean, "gaussian_kde")))
        c = atleast_2d(api.asvalue(covariance, "gaussian_kde"))
        if tuple(m.shape) != (self.d,) or tuple(c.shape) != (self.d, self.d):
            raise ShapeError(
                f"mean {tuple(m.shape)} and covariance {tuple(c.shape)} for data of "
                f"dimension {self.d}",
                op="gaussian_kde",
            )
        total = api.add(self.covariance, c)
        out = self._convolve(total, self.dataset, self.weights, composite.expand_dims(m, -1))
        return api.reshape(out, ())

    def _convolve(self, total_cov: Any, target: Any, weights: Any, means: Any) -> Any:
        """``Σᵢ wᵢ N(targetᵢ; meanⱼ, total_cov)`` for each column ``meanⱼ`` of ``means``
        (``[d, k]`` → ``[k]``): every difference in one ``[d, n·k]`` solve."""
        chol = cholesky(total_cov)
        norm_term = api.mul(
            composite.prod(composite.diagonal(chol)), math.sqrt(2 * math.pi) ** self.d
        )
        n, k = target.shape[1], means.shape[1]
        diff = api.sub(composite.expand_dims(target, -1), composite.expand_dims(means, 1))
        diff = api.reshape(diff, (self.d, n * k))
        alpha = solve(total_cov, diff)
        arg = api.reshape(api.mul(api.sum(api.mul(diff, alpha), 0), 0.5), (n, k))
        kernels = api.mul(api.exp(api.neg(arg)), composite.expand_dims(weights, -1))
        return api.div(api.sum(kernels, 0), norm_term)

    def integrate_box_1d(self, low: Any, high: Any) -> Any:
        """The estimate's mass between ``low`` and ``high`` (one dimension)."""
        if self.d != 1:
            raise ShapeError("integrate_box_1d only handles 1-d densities", op="gaussian_kde")
        sigma = api.sqrt(api.reshape(self.covariance, ()))
        data = api.reshape(self.dataset, (-1,))
        hi = ndtr(api.div(api.sub(high, data), sigma))
        lo = ndtr(api.div(api.sub(low, data), sigma))
        return api.sum(api.mul(self.weights, api.sub(hi, lo)))

    def integrate_kde(self, other: gaussian_kde) -> Any:
        """The integral of the product of this estimate and ``other``."""
        if other.d != self.d:
            raise ShapeError("the two estimates are not of one dimension", op="gaussian_kde")
        small, large = (self, other) if self.n < other.n else (other, self)
        total = api.add(self.covariance, other.covariance)
        per_point = self._convolve(total, large.dataset, large.weights, small.dataset)
        return api.sum(api.mul(per_point, small.weights))

    def resample(self, seed: int, shape: tuple[int, ...] = ()) -> Any:
        """``shape`` new points drawn from the estimate, ``[d, *shape]``: a datum chosen by
        its weight, plus Gaussian noise of the kernel's covariance."""
        size = math.prod(shape)
        u = prandom.uniform(seed, (size,), self.dataset.dtype)
        cdf = composite.cumsum(self.weights)
        idx = api.minimum(searchsorted(cdf, u, "right"), self.n - 1)
        eps = prandom.normal(seed + 1, (self.d, size), self.dataset.dtype)
        noise = api.matmul(cholesky(self.covariance), eps)
        out = api.add(take(self.dataset, idx, 1), noise)
        return api.reshape(out, (self.d, *shape))
