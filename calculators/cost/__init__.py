"""Money: cloud prices (prices), GPUs no one prices (unpriced), spot interruptions and the
Young/Daly checkpoint interval (spot), pricing one run on one instance, on demand, on spot or
owned (pricing: the one pricing path the Cost page and the planner share), the time-cost front
(pareto), the cost of a run on every priced option and buy vs rent (options), the run's spot and
price inputs as a user gives them (run_inputs), and the CSV/Excel downloads (exports).
"""
