"""Byte units, written once: GiB and MiB (binary, 2^30 and 2^20 bytes), as torch and NVML count;
and counts written with their noun ("1 sequence", "63 sequences")."""

GIB = 2**30
MIB = 2**20


def counted(count: int, noun: str) -> str:
    """'1 sequence', '1,024 sequences': the count with its noun, plural but for one."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def rate_text(per_s: float) -> str:
    """A rate as people read it: whole from 100 up (164, 6,912), one decimal below (3.2), so the
    same rate on two pages reads alike."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:,.1f}"
