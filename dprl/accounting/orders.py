"""Renyi orders and RDP curves: the default order grid and the checks the accountants apply."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dprl.validation import require_array

#: The RDP order grid 1.1, 1.2, ..., 11.0, then 12, ..., 63, then 128, 256, 512: the orders
#: of dp-accounting 0.6.0's default grid less its last one, 1024.
DEFAULT_ORDERS: np.ndarray = np.array(
    [1 + x / 10 for x in range(1, 101)] + list(range(12, 64)) + [128, 256, 512], dtype=float)

#: The integer orders of :data:`DEFAULT_ORDERS` (2, ..., 63, 128, 256, 512), for bounds such
#: as Wang, Balle & Kasiviswanathan (2019, Thm. 9) that hold at integer orders only.
DEFAULT_INTEGER_ORDERS: np.ndarray = DEFAULT_ORDERS[DEFAULT_ORDERS == np.round(DEFAULT_ORDERS)]


def as_orders(orders: ArrayLike, *, integer: bool = False) -> np.ndarray:
    """Return ``orders`` as a float array (scalar or 1-D) of Renyi orders alpha > 1.

    RDP is defined for orders alpha > 1 (Mironov 2017, Def. 4; orders <= 1 are not
    used). With ``integer=True`` every order must also be a whole number, for
    results proved at integer orders only. Functions of the orders return arrays of their
    shape (a numpy scalar for a scalar order, as numpy's ufuncs do).
    """
    orders = require_array("orders", orders)
    if orders.ndim > 1:
        raise ValueError(f"orders must be a scalar or a 1-D array, got shape {orders.shape}")
    if np.any(orders <= 1):
        raise ValueError(f"orders must all be > 1 (Renyi orders), got min {orders.min()}")
    if integer and np.any(orders != np.round(orders)):
        bad = orders[orders != np.round(orders)]
        raise ValueError(f"orders must be integers for this bound, got {bad.tolist()}")
    return orders


def as_rdp_curve(name: str, rdp: ArrayLike) -> np.ndarray:
    """Return ``rdp`` as a float array (scalar or 1-D) of RDP values: finite and >= 0, as
    Renyi divergences are (Mironov 2017, Sec. 3)."""
    rdp = require_array(name, rdp)
    if rdp.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {rdp.shape}")
    if np.any(rdp < 0):
        raise ValueError(f"{name} must be >= 0 (Renyi divergences), got min {rdp.min()}")
    return rdp
