"""Pins numpy's floating-point configuration (dprl.floating_point) before any test or chapter
kernel loads numpy: chapters' kernels inherit this process's environment."""

import dprl  # noqa: F401
