"""Imports every module that registers experiments of the book."""

import dprl.experiments.primer  # noqa: F401
import dprl.experiments.balle2016  # noqa: F401
import dprl.experiments.xie2019  # noqa: F401
import dprl.experiments.xie2019_theory  # noqa: F401
import dprl.experiments.xie2019_calibration  # noqa: F401
import dprl.experiments.mountain_car  # noqa: F401
import dprl.experiments.hiv_policy  # noqa: F401
import dprl.experiments.hiv  # noqa: F401
import dprl.experiments.wang2019  # noqa: F401
import dprl.experiments.sharma2025  # noqa: F401
import dprl.experiments.sharma2025_release  # noqa: F401
import dprl.experiments.sharma2025_training  # noqa: F401
import dprl.experiments.sharma2025_ppo  # noqa: F401
import dprl.experiments.audits  # noqa: F401
import dprl.experiments.audits_balle2016  # noqa: F401
import dprl.experiments.audits_xie2019  # noqa: F401
import dprl.experiments.audits_wang2019  # noqa: F401
import dprl.experiments.audits_sharma2025  # noqa: F401
import dprl.experiments.audit_one_run  # noqa: F401
