"""Empirical privacy audits of every mechanism of the book, on the conventions of
:mod:`~.common` (which also audits the Gaussian and Laplace mechanisms): Balle 2016
(:mod:`~.balle2016`), Xie 2019 (:mod:`~.xie2019`), Wang 2019 (:mod:`~.wang2019`), Sharma 2025
(:mod:`~.sharma2025`, :mod:`~.sharma2025_dp_sgd`, :mod:`~.sharma2025_training`) and the
one-run audit of a training (:mod:`~.one_run`)."""
