"""Sharma et al. (2025, Sec. 6 and App. B.3): the training protocol's named choices, without
torch (so that experiment configs can be checked where no run computes)."""

#: The offline learners of Sec. 6.
ALGORITHMS = ("CQL", "BCQ")

#: The optimisers a run may take: Alg. 4's plain SGD (line 9, ``phi <- phi - eta g~``) and
#: Adam (Kingma & Ba 2015), both at Table 3's learning rate.
OPTIMIZERS = ("sgd", "adam")

#: Discount of each environment's learner: 0.99, HIV's MDP 0.98 (Ernst et al. 2006).
GAMMAS = {"CartPole": 0.99, "Acrobot": 0.99, "LunarLander": 0.99, "HIV": 0.98}


def ours_split(env: str, p: float) -> str:
    """The eps split of selective DP-SGD's run at Table 3's ``p``: HIV's ``p = 0`` rows follow
    Sec. 6 (``eps1 = eps``), every other row App. B.3."""
    return "section6" if env == "HIV" and p == 0 else "appendix_b3"
