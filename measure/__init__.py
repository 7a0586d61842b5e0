"""Measurement code: the fake-tensor trace and the host calibration.

Everything here may need torch, NVML, SQLite or subprocesses, always imported lazily, so
the pure estimates in `calculators/` and the pages that only read them never pay for them.
"""
