"""Byte units, written once: GiB and MiB (binary, 2^30 and 2^20 bytes), as torch and NVML count."""

GIB = 2**30
MIB = 2**20
