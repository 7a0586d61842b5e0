"""Money: cloud prices (prices), GPUs no one prices (unpriced), spot interruptions and the
Young/Daly checkpoint interval (spot), the cost of a run on every priced option, buy vs rent
(options), and the CSV/Excel downloads (exports).
"""
