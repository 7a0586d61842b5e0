"""The estimates against published measurements: peak memory of real training and serving
runs (peak_memory) and training throughput (throughput).
"""
