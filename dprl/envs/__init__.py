"""Environments: the chain of Balle et al. (2016), as an exact MDP and a Gymnasium env; a
vectorised twin of Gymnasium's MountainCar-v0 (Xie et al. 2019, Sec. 7), continuous-state
episode batches (:mod:`dprl.envs.episodes`), the 1-D MDP of Wang & Hegde (2019, Sec. 4),
registered as ``dprl/Line-v0``, and the HIV treatment simulator of Ernst et al. (2006),
``dprl/HIVTreatment-v0`` (:mod:`dprl.envs.hiv`).

Importing this package registers ``dprl/Chain-v0`` (idempotently). Its defaults are those of
:class:`ChainMDP`; keyword arguments of ``gymnasium.make`` are ChainMDP fields, e.g.
``gymnasium.make("dprl/Chain-v0", n_states=10)``. Truncation at the horizon is done by the
environment itself (no ``max_episode_steps``).
"""

import gymnasium

from dprl.envs.chain import ChainEnv, ChainMDP
from dprl.envs.episodes import Episodes, UniformPolicy, simulate
from dprl.envs.hiv import HIVTreatmentEnv, HIVTreatmentMDP
from dprl.envs.line_mdp import LineEnv, LineMDP
from dprl.envs.mountain_car import MountainCar, mountain_car_features
from dprl.envs.off_policy_chain import OffPolicyChain
from dprl.envs.trajectories import Trajectories, stack_trajectories

CHAIN_ID = "dprl/Chain-v0"
LINE_ID = "dprl/Line-v0"
HIV_ID = "dprl/HIVTreatment-v0"

if CHAIN_ID not in gymnasium.registry:
    gymnasium.register(id=CHAIN_ID, entry_point="dprl.envs.chain:ChainEnv")
if LINE_ID not in gymnasium.registry:
    gymnasium.register(id=LINE_ID, entry_point="dprl.envs.line_mdp:LineEnv")
if HIV_ID not in gymnasium.registry:
    gymnasium.register(id=HIV_ID, entry_point="dprl.envs.hiv:HIVTreatmentEnv")

__all__ = ["CHAIN_ID", "HIV_ID", "LINE_ID", "ChainEnv", "ChainMDP", "Episodes",
           "HIVTreatmentEnv", "HIVTreatmentMDP", "LineEnv", "LineMDP",
           "MountainCar", "OffPolicyChain",
           "Trajectories", "UniformPolicy", "mountain_car_features", "simulate",
           "stack_trajectories"]
