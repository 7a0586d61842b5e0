"""Pure domain logic: GPU memory, step time and cost of training and serving a model.

The flow a reader follows: workload (what to run) -> models (what the model is) -> memory and
timing (what one GPU holds and how long a step takes) -> cost (what it costs where) -> plan (the
cheapest and fastest ways). hardware holds the GPU catalogue, validation the published
measurements, interface the command line and the declared settings, units the byte units (GIB).
No module here imports torch, NVML, SQLite, subprocess, streamlit or measure/, but the command
line's lazy imports.
"""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
