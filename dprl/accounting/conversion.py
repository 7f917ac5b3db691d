"""From an RDP curve to (eps, delta)-DP, minimising over the orders given."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dprl.accounting.orders import as_orders, as_rdp_curve
from dprl.validation import require_delta, require_nonnegative

METHODS = ("improved", "classic")


def rdp_to_dp(orders: ArrayLike, rdp: ArrayLike, delta: float,
              method: str = "improved") -> tuple[float, float]:
    """Smallest eps, over the given orders, such that the RDP curve implies (eps, delta)-DP.

    ``method="classic"``: eps = min_alpha rdp(alpha) + log(1/delta)/(alpha - 1) (Mironov
    2017, Prop. 3). ``method="improved"``: eps = min_alpha rdp(alpha) + log(1 - 1/alpha)
    - (log delta + log alpha)/(alpha - 1) (Balle, Barthe, Gaboardi, Hsu & Sato 2020, Thm. 21;
    Canonne, Kamath & Steinke 2020, Prop. 12), never larger than the classic one. A
    negative minimum is reported as 0, which (eps, delta)-DP with eps < 0 implies.
    Returns (eps, the minimising order).
    """
    orders, rdp = _curve(orders, rdp)
    delta = require_delta(delta)
    log_slack = _log_slack(orders, method)
    eps = rdp + (log_slack - np.log(delta)) / (orders - 1)
    best = int(np.argmin(eps))
    return max(float(eps[best]), 0.0), float(orders[best])


def rdp_to_delta(orders: ArrayLike, rdp: ArrayLike, eps: float,
                 method: str = "improved") -> tuple[float, float]:
    """Smallest delta, over the given orders, such that the RDP curve implies (eps, delta)-DP.

    The inverse of :func:`rdp_to_dp` at fixed eps >= 0: delta = min_alpha
    exp((alpha - 1)(rdp(alpha) - eps) + s(alpha)) with s = 0 for ``"classic"`` (Mironov 2017,
    Prop. 3) and s = (alpha - 1) log(1 - 1/alpha) - log alpha for ``"improved"`` (Balle et
    al. 2020, Thm. 21; Canonne, Kamath & Steinke 2020, Prop. 12); capped at 1, which always
    holds. Returns (delta, the minimising order).
    """
    orders, rdp = _curve(orders, rdp)
    eps = require_nonnegative("eps", eps)
    log_delta = (orders - 1) * (rdp - eps) + _log_slack(orders, method)
    best = int(np.argmin(log_delta))
    return min(float(np.exp(log_delta[best])), 1.0), float(orders[best])


def _curve(orders: ArrayLike, rdp: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Orders and RDP values as matching 1-D arrays (a scalar pair becomes length 1)."""
    orders = np.atleast_1d(as_orders(orders))
    rdp = np.atleast_1d(as_rdp_curve("rdp", rdp))
    if rdp.shape != orders.shape:
        raise ValueError(f"rdp must have the shape of orders {orders.shape}, got {rdp.shape}")
    return orders, rdp


def _log_slack(orders: np.ndarray, method: str) -> np.ndarray:
    """(alpha - 1) log(1 - 1/alpha) - log alpha for "improved", 0 for "classic"."""
    if method == "classic":
        return np.zeros_like(orders)
    if method == "improved":
        return (orders - 1) * np.log1p(-1 / orders) - np.log(orders)
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")
