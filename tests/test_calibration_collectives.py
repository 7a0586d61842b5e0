"""`calibrate --collectives`: nccl-tests' figures by hand, the sweep across two local torchrun agents
(gloo on the CPU), and the one-line messages when a peer never arrives or a node dies mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from calculators.interface import cli
from measure.calibration import collective_launch as launch
from measure.calibration.collectives import COLLECTIVES, SWEEP_STARTED, bus_factor, curve_point, sweep_sizes
from measure.calibration.result import CalibrationResult
from measure.calibration.store import CalibrationStore


@pytest.fixture(autouse=True)
def private_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))
    monkeypatch.delenv("GPU_SIZING_CALIBRATION_DB", raising=False)


def test_bus_factors_are_nccl_tests():
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n.
    assert bus_factor("all_reduce", 8) == 14 / 8 == 1.75
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == 7 / 8
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_gather", 2) == 0.5
    assert bus_factor("all_reduce", 1) == 0.0  # one rank moves nothing over a link


def test_a_point_is_bytes_over_time_times_the_bus_factor():
    # 1 GB all-reduced by 8 ranks in 0.1 s: algbw 1e9 / 0.1 = 10 GB/s, busbw 10 x 1.75 = 17.5 GB/s.
    point = curve_point("all_reduce", 1_000_000_000, 0.1, 8)
    assert point == pytest.approx({"bytes": 1e9, "algbw_gbytes_per_s": 10.0, "busbw_gbytes_per_s": 17.5, "time_s": 0.1})
    assert curve_point("all_gather", 1_000_000_000, 0.1, 8)["busbw_gbytes_per_s"] == pytest.approx(8.75)


def test_sizes_double_from_1_kb_to_1_gb():
    sizes = sweep_sizes()
    assert sizes[0] == 1024 and sizes[-1] == 1024**3 and len(sizes) == 21  # 2^10 .. 2^30
    assert all(later == 2 * earlier for earlier, later in zip(sizes, sizes[1:], strict=False))


def error_lines(stderr: str) -> list[str]:
    """What is not a progress line ('[  0%] Collectives ...')."""
    return [line for line in stderr.splitlines() if not line.startswith("[")]


RENDEZVOUS = launch.Rendezvous(2, 0, "10.0.0.1:29500", 30)
WORKER_DIED = (
    f"{SWEEP_STARTED} (pid 41)\n[rank0]: Traceback (most recent call last):\n"
    "[rank0]: RuntimeError: [/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
    "[10.0.0.2]:5522: Connection reset by peer. This is typically caused by a remote worker hanging\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n====\n"
)


@pytest.mark.parametrize(
    ("stderr", "message"),
    [
        (
            "torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. 1/2 clients joined.",
            "a peer never arrived: not all 2 nodes joined the rendezvous at 10.0.0.1:29500 within 30 s; ",
        ),
        (
            WORKER_DIED,
            "a node stopped in the middle of the sweep, so nothing was written "
            "(RuntimeError: Read error [10.0.0.2]:5522: Connection reset by peer)",
        ),
        (
            # the peer died while this node was still connecting its mesh, before its own sweep started
            "[rank0]: RuntimeError: Gloo connectFullMesh failed with Connection closed by peer [127.0.0.1]:10667\n",
            "a node stopped in the middle of the sweep, so nothing was written "
            "(RuntimeError: Gloo connectFullMesh failed with Connection closed by peer [127.0.0.1]:10667)",
        ),
        ("ValueError: something else\n", "torchrun exited with code 1: ValueError: something else"),
    ],
)
def test_a_failed_node_is_told_apart_by_what_torchrun_printed(stderr, message):
    assert launch.failure_message(stderr, 1, RENDEZVOUS).startswith(message)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["calibrate", "--device", "cpu", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_two_local_nodes_write_the_three_curves(tmp_path, capsys):
    out = tmp_path / "collectives.json"
    code, stdout, err = run(capsys, "--collectives", "--nodes", "2", "--budget-s", "6", "--out", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    result = CalibrationResult.model_validate(data)
    for name in COLLECTIVES:
        curve = data[name]
        assert curve[0]["bytes"] == 1024 and len(curve) >= 3
        assert [point["bytes"] for point in curve] == [1024 * 2**k for k in range(len(curve))]
        for point in curve:  # two ranks: all-reduce's factor is 1, the others' 1/2
            factor = 1.0 if name == "all_reduce" else 0.5
            assert point["busbw_gbytes_per_s"] == pytest.approx(point["algbw_gbytes_per_s"] * factor)
            assert point["algbw_gbytes_per_s"] == pytest.approx(point["bytes"] / point["time_s"] / 1e9)
        assert result.record(f"{name}_busbw").details["world_size"] == 2
    assert "all_reduce_busbw" in stdout


def test_two_nodes_meet_at_an_endpoint_and_only_node_0_keeps_the_result_in_the_fleets_store(tmp_path):
    """The multi-node path: the same command on each node with its own --node-rank (each its own host
    lock, as on two hosts), one store for the fleet."""
    endpoint, store = launch.free_local_endpoint(), tmp_path / "fleet.sqlite3"
    nodes = []
    for rank in (0, 1):
        env = os.environ | {
            "GPU_SIZING_CALIBRATION_DB": str(store),
            "GPU_SIZING_CALIBRATION_LOCK": str(tmp_path / f"{rank}.lock"),
        }
        argv = [
            "--collectives",
            "--nodes",
            "2",
            "--node-rank",
            str(rank),
            "--rdzv-endpoint",
            endpoint,
            "--budget-s",
            "4",
        ]
        command = [
            sys.executable,
            "-m",
            "calculators",
            "calibrate",
            "--device",
            "cpu",
            *argv,
            "--out",
            str(tmp_path / f"{rank}.json"),
        ]
        nodes.append(subprocess.Popen(command, cwd=launch.REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True))
    assert [node.wait(timeout=240) for node in nodes] == [0, 0], [node.stderr.read() for node in nodes]
    for node in nodes:
        node.stderr.close()
    first, second = (json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1))
    assert first["all_reduce"] == second["all_reduce"] and len(first["all_gather"]) >= 2  # the same sweep
    [kept] = CalibrationStore(store).history()
    assert kept.all_reduce == CalibrationResult.model_validate(first).all_reduce


def test_a_peer_that_never_arrives_is_one_line_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "collectives.json"
    endpoint = launch.free_local_endpoint()
    argv = ["--collectives", "--nodes", "2", "--node-rank", "0", "--rdzv-endpoint", endpoint, "--rdzv-timeout-s", "3"]
    code, _, err = run(capsys, *argv, "--budget-s", "5", "--out", str(out))
    assert code == 2
    [line] = error_lines(err)
    assert line.startswith(
        f"error: a peer never arrived: not all 2 nodes joined the rendezvous at {endpoint} within 3 s"
    )
    assert not out.exists()


def _kill_when_sweeping(process: subprocess.Popen) -> None:
    """Stop this node once its worker has started the sweep: the worker (torchrun starts it in a
    session of its own, so it names its pid) and the agent."""
    for line in process.stderr:
        if SWEEP_STARTED in line:
            os.kill(int(line.rsplit("pid ", 1)[1].rstrip(")\n")), signal.SIGKILL)
            os.killpg(process.pid, signal.SIGKILL)
            return


def test_a_node_that_dies_mid_run_is_one_line(tmp_path):
    endpoint = launch.free_local_endpoint()
    node1 = launch.Rendezvous(2, 1, endpoint, 20)
    command = launch.torchrun_command(node1, 1, "gloo", 30, tmp_path / "node1.json")
    process = subprocess.Popen(command, cwd=launch.REPO_ROOT, env=launch._environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    killer = threading.Thread(target=_kill_when_sweeping, args=(process,), daemon=True)
    killer.start()
    try:
        with pytest.raises(launch.CollectiveRunError, match="^a node stopped in the middle of the sweep, so nothing"):
            launch.run_nodes([launch.Rendezvous(2, 0, endpoint, 20)], 1, "gloo", 30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert not (tmp_path / "node1.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--collectives", "--nodes", "0"], "error: --nodes must be between 1 and 4096, got 0"),
        (["--collectives", "--nodes", "2", "--node-rank", "1"], "error: --node-rank needs --rdzv-endpoint HOST:PORT"),
        (["--collectives", "--nodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29500"],
         "error: --node-rank must be between 0 and 1 for --nodes 2, got 2"),
        (["--collectives", "--nodes", "2", "--rdzv-endpoint", "h"], "error: --rdzv-endpoint must be HOST:PORT"),
        (["--collectives", "--rdzv-timeout-s", "nan"], "error: --rdzv-timeout-s must be between 1 and 3600"),
        (["--nodes", "2"], "error: --nodes, --node-rank and --rdzv-endpoint go with --collectives"),
        (["--collectives"], "error: --collectives needs two or more processes: --nodes 2 or more"),
    ],
)  # fmt: skip
def test_a_request_that_cannot_work_is_refused_in_one_line(tmp_path, capsys, argv, message):
    code, _, err = run(capsys, *argv, "--budget-s", "5", "--out", str(tmp_path / "c.json"))
    assert code == 2
    [line] = error_lines(err)
    assert line.startswith(message)
    assert not (tmp_path / "c.json").exists()
