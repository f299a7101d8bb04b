"""``pto.scipy.stats``: ``jax.scipy.stats``'s distributions, one module each, with JAX's
functions and arguments (``loc``, ``scale`` and the shape parameters broadcast).

They are plain functions over pypto's ops (``norm.logcdf`` is :func:`pto.log_ndtr`,
``gamma.logpdf`` uses :func:`pto.lgamma` and :func:`pto.xlogy`), so they trace,
differentiate and compile for the NPU. The CDFs of ``gamma``, ``chi2``, ``poisson`` and
``gennorm`` go through :func:`pypto.scipy.special.gammainc` and ``beta``'s through
:func:`pypto.scipy.special.betainc`.

>>> import pypto as pto
>>> pto.scipy.stats.norm.cdf(pto.tensor([0.0, 1.96])).numpy()
array([0.5      , 0.9750021], dtype=float32)
"""

from pypto.scipy.stats import (
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from pypto.scipy.stats._kde import gaussian_kde
from pypto.scipy.stats._summary import ModeResult, mode, rankdata, sem

__all__ = [
    "ModeResult",
    "bernoulli",
    "beta",
    "betabinom",
    "binom",
    "cauchy",
    "chi2",
    "dirichlet",
    "expon",
    "gamma",
    "gaussian_kde",
    "gennorm",
    "geom",
    "gumbel_l",
    "gumbel_r",
    "laplace",
    "logistic",
    "mode",
    "multinomial",
    "multivariate_normal",
    "nbinom",
    "norm",
    "pareto",
    "poisson",
    "rankdata",
    "sem",
    "t",
    "truncnorm",
    "uniform",
    "vonmises",
    "wrapcauchy",
]
