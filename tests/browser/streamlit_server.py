"""A `streamlit run` on a free local port, healthy before it is used: shared by the browser tests'
app fixture and bench/bench_clicks.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_streamlit(
    script: Path | str, cwd: Path, timeout_s: float, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """`streamlit run script` headless on a free port; the process and its address once its health
    endpoint answers. A server that exits or stays silent for `timeout_s` is stopped and raises."""
    port = free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
        "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    environment = os.environ | (env or {})
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit run {script} exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.3)
    stop_streamlit(process)
    raise RuntimeError(f"streamlit run {script} did not answer within {timeout_s:g} s")


def stop_streamlit(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=20)
