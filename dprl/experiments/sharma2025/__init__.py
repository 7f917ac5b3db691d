"""Sharma et al. (2025)'s experiments: the experts (:mod:`~.experts`, PPO's :mod:`~.ppo`), the
data release (:mod:`~.release`) and the offline learners trained on it (:mod:`~.training`)."""
