"""Xie et al. (2019)'s experiments: the chain MDP's runs (:mod:`~.chain`), the theory's
schedules (:mod:`~.theory`), the PLD calibration (:mod:`~.calibration`), and the two
off-policy domains, MountainCar (:mod:`~.mountain_car`) and HIV (:mod:`~.hiv`, its evaluated
policy :mod:`~.hiv_policy`), on the conventions of :mod:`~.off_policy`."""
