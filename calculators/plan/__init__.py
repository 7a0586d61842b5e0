"""Planning a run: the cheapest and fastest ways to train on N tokens within a deadline and a
budget, searched over GPUs, counts, providers and prices (search) and, per GPU count, the layouts
that fit (layouts); the launch settings of a plan for each training stack (launch), and its
downloads (exports).
"""
