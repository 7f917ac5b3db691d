"""The book's experiments, one explicit list: importing this module registers every one of
them with the run engine (:mod:`dprl.engine.registry`), which loads it through the
``dprl.catalogues`` entry point of ``pyproject.toml``. A new experiment module is added here."""

import dprl.experiments.primer  # noqa: F401  (each registers its experiments on import)
import dprl.experiments.balle2016  # noqa: F401
import dprl.experiments.xie2019.chain  # noqa: F401
import dprl.experiments.xie2019.theory  # noqa: F401
import dprl.experiments.xie2019.calibration  # noqa: F401
import dprl.experiments.xie2019.rdp_grid  # noqa: F401
import dprl.experiments.xie2019.mountain_car_policy  # noqa: F401
import dprl.experiments.xie2019.mountain_car_reference  # noqa: F401
import dprl.experiments.xie2019.mountain_car  # noqa: F401
import dprl.experiments.xie2019.hiv_policy  # noqa: F401
import dprl.experiments.xie2019.hiv_data  # noqa: F401
import dprl.experiments.xie2019.hiv  # noqa: F401
import dprl.experiments.wang2019  # noqa: F401
import dprl.experiments.sharma2025.experts  # noqa: F401
import dprl.experiments.sharma2025.release  # noqa: F401
import dprl.experiments.sharma2025.runs  # noqa: F401
import dprl.experiments.sharma2025.ppo  # noqa: F401
import dprl.experiments.sharma2025.group_attack  # noqa: F401
import dprl.experiments.sharma2025.learners  # noqa: F401
import dprl.experiments.audits.common  # noqa: F401
import dprl.experiments.audits.balle2016  # noqa: F401
import dprl.experiments.audits.xie2019  # noqa: F401
import dprl.experiments.audits.wang2019  # noqa: F401
import dprl.experiments.audits.sharma2025  # noqa: F401
import dprl.experiments.audits.one_run  # noqa: F401
