"""Planning a run: search GPUs, counts, layouts and prices for the cheapest and fastest ways
to train on N tokens within a deadline and a budget (search), the launch settings of a plan for
each training stack (launch), and its downloads (exports).
"""
