"""The environment variants on which Sharma et al. (2025, App. B.1) train their experts.

Each environment's parameters take 10 equally spaced values over a range (App. B.1); the
settings are every combination, in the order of ``numpy.meshgrid(..., indexing="ij")`` over
the parameters as listed (the last parameter varies fastest). Names are Gymnasium's
attribute names where Gymnasium has the parameter (``sharma2025-details.md``).
"""

from __future__ import annotations

import numpy as np

from dprl.validation import require_choice

#: App. B.1's grids: environment -> parameter -> (low, high, number of values). CartPole and
#: Acrobot defaults are Gymnasium's; LunarLander's ``gravity`` is Gymnasium's signed value
#: (default -10): the paper's magnitudes 9.0 .. 11.0 map to -9.0 .. -11.0 (the paper's
#: "default 9.8" is not Gymnasium's default, -10, which lies inside the grid). Acrobot's
#: ``link_length`` is the common length of both links (App. B.1); how it enters the dynamics
#: is stated in :mod:`dprl.envs.acrobot`. HIV's ``efficacy_noise`` is the standard deviation
#: of the Gaussian noise on the drug efficacies (0 or 0.01).
GRIDS: dict[str, dict[str, tuple[float, float, int]]] = {
    "CartPole": {"gravity": (8.75, 11.0, 10), "force_mag": (9.0, 11.25, 10),
                 "masscart": (0.8, 1.25, 10)},
    "Acrobot": {"link_length": (0.8, 1.2, 10), "link_mass_1": (0.9, 1.1, 10),
                "link_mass_2": (0.9, 1.1, 10)},
    "LunarLander": {"gravity": (-9.0, -11.0, 10), "wind_power": (0.0, 5.0, 10),
                    "turbulence_power": (0.0, 0.5, 10)},
    "HIV": {"drug_1_penalty": (18750.0, 21250.0, 50), "drug_2_penalty": (1850.0, 2150.0, 20),
            "efficacy_noise": (0.0, 0.01, 2)},
}

#: Gymnasium's (or, for HIV, Ernst et al. 2006's) default of each varied parameter: the
#: environment on which every expert's demonstrations are recorded (App. B.1).
DEFAULTS: dict[str, dict[str, float]] = {
    "CartPole": {"gravity": 9.8, "force_mag": 10.0, "masscart": 1.0},
    "Acrobot": {"link_length": 1.0, "link_mass_1": 1.0, "link_mass_2": 1.0},
    "LunarLander": {"gravity": -10.0, "wind_power": 0.0, "turbulence_power": 0.0},
    "HIV": {"drug_1_penalty": 20000.0, "drug_2_penalty": 2000.0, "efficacy_noise": 0.0},
}


def variant_grid(env: str) -> dict[str, np.ndarray]:
    """Every setting of ``env``'s App. B.1 grid: parameter -> ``(n_settings,)`` values (1000
    settings for CartPole, Acrobot and LunarLander, 2000 for HIV)."""
    require_choice("env", env, GRIDS)
    axes = [np.linspace(low, high, n) for low, high, n in GRIDS[env].values()]
    mesh = np.meshgrid(*axes, indexing="ij")
    return {name: values.ravel() for name, values in zip(GRIDS[env], mesh)}
