"""Control: learning policies to evaluate (Watkins Q-learning with linear features, as Xie,
Thomas & Miklau 2019, Sec. 7, obtain their Mountain Car and HIV policies)."""

from dprl.control.linear_q import (EpsilonGreedyPolicy, QLearningResult, SoftmaxPolicy,
                                   epsilon_greedy_probabilities, greedy_policy, q_learning)

__all__ = ["EpsilonGreedyPolicy", "QLearningResult", "SoftmaxPolicy",
           "epsilon_greedy_probabilities", "greedy_policy", "q_learning"]
