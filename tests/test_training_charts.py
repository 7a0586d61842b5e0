"""The training charts read at 800 px: the scaling chart's legend below it and its GPU axis at whole
decades, the Memory chart's capacity label on its own box, picked GPUs named beside their points."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io

from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings
from ui.charts import memory_bandwidth_figure, scaling_figure, tflops_price_figure
from ui.memory_chart import Segment, phase_breakdown_chart, stacked_gib_chart

# the review's Llama-3.1-8B run on 1 to 512 H100s: 36.8 h on one, halving with each doubling
GPUS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
HOURS = [36.8 / n for n in GPUS]


def test_the_scaling_chart_keeps_its_legend_off_the_right_axis_and_its_gpu_ticks_flat():
    figure = scaling_figure(GPUS, [7_549, 7_100, 7_000, 7_000, 4_800, 4_500, 4_400, 4_350, 4_300, 4_300], HOURS)
    assert figure.layout.legend.orientation == "h" and figure.layout.legend.y < 0
    assert list(figure.layout.xaxis.ticktext) == ["1", "10", "100", "1k"] and figure.layout.xaxis.tickangle == 0
    assert figure.layout.margin.t >= 40  # the top hours tick (50 h) has room above the plot


def test_the_capacity_line_is_labelled_in_red_on_a_white_halo():
    """The label 'GPU 80 GiB' at the capacity, drawn twice: a white stroke first, then the red words,
    so it reads over an orange bar."""
    estimate = estimate_memory(get_preset("llama-3.2-1b"), TrainingSettings(micro_batch=2, seq_len=2048))
    bars, line, halo, words = phase_breakdown_chart(estimate, 80).spec["layer"]
    assert line["mark"]["type"] == "rule" and line["encoding"]["y"]["datum"] == 80
    assert halo["encoding"]["text"]["value"] == words["encoding"]["text"]["value"] == "GPU 80 GiB"
    assert halo["mark"]["stroke"] == "white" and words["mark"]["color"] == "red"
    assert bars["encoding"]["y"]["title"] == "GiB per GPU"


def test_the_memory_chart_stacks_each_phase_in_the_engines_order_with_its_own_numbers():
    """One row per phase and component the step holds, the phases left to right as the step runs them,
    the components from the bottom up in the engine's order; a component absent from every phase is
    not in the legend."""
    estimate = estimate_memory(get_preset("llama-3.2-1b"), TrainingSettings(micro_batch=2, seq_len=2048))
    chart = phase_breakdown_chart(estimate, 80)
    phases = list(estimate.phase_components_gib)
    bars = chart.spec["layer"][0]["encoding"]
    assert bars["x"]["sort"] == phases and bars["order"]["field"] == "stack"
    legend = bars["color"]["scale"]["domain"]
    assert legend[0] == "Weights" and "Autocast weight copies" not in legend  # BF16 mixed casts no weight copies
    peak = chart.data[chart.data["column"] == estimate.peak_phase]
    # the stacked segments of the peak phase add up to its device view, reserve and context included
    assert abs(peak["GiB"].sum() - sum(estimate.phase_components_gib[estimate.peak_phase].values())) < 1e-9
    assert list(peak["stack"]) == sorted(peak["stack"])


def test_a_stacked_chart_names_no_data_in_its_spec():
    """The rows travel beside the spec (st.vega_lite_chart(data, spec)), so a change of the numbers
    keeps the spec and Streamlit keeps the chart mounted."""
    segments = [Segment("per GPU", "Weights", 12.5), Segment("per GPU", "KV cache", 4.0)]
    small = stacked_gib_chart(segments, {"Weights": "#1f77b4", "KV cache": "#9467bd"}, 24, 300, "bar")
    larger = stacked_gib_chart(
        [Segment("per GPU", "Weights", 13.0), Segment("per GPU", "KV cache", 6.0)],
        {"Weights": "#1f77b4", "KV cache": "#9467bd"}, 24, 300, "bar",
    )  # fmt: skip
    assert small.spec == larger.spec and "data" not in small.spec
    assert list(small.data["GiB"]) == [12.5, 4.0] and list(larger.data["GiB"]) == [13.0, 6.0]


def _table() -> pd.DataFrame:
    # catalogue figures: H100 80 GB 3.35 TB/s 989 TFLOPS $30,000; A100 80 GB 2.0 TB/s 312 TFLOPS $15,000
    return pd.DataFrame(
        {
            "name": ["H100-SXM5-80GB", "A100-SXM4-80GB", "RTX-4090-24GB"],
            "vendor": ["NVIDIA"] * 3,
            "memory_gb": [80, 80, 24],
            "memory_bandwidth_tbps": [3.35, 2.04, 1.01],
            "bf16_tflops": [989, 312, 165],
            "price_usd": [30_000, 15_000, 1_600],
            "detected": [False] * 3,
        }
    )


def test_picked_gpus_are_named_beside_their_points_not_on_them():
    picked = ["H100-SXM5-80GB", "A100-SXM4-80GB"]
    for figure in (
        memory_bandwidth_figure(_table(), picked),
        tflops_price_figure(_table(), "bf16_tflops", "BF16", picked),
    ):
        names = sorted(note.text for note in figure.layout.annotations)
        assert names == sorted(picked)
        assert all(note.showarrow and note.bgcolor for note in figure.layout.annotations)
        assert all(trace.mode == "markers" for trace in figure.data)  # no text drawn over the points
    # staggered: two names never on one line
    assert (
        len({note.ay for note in tflops_price_figure(_table(), "bf16_tflops", "BF16", picked).layout.annotations}) == 2
    )


def test_a_finished_figure_sends_its_figure_on_every_draw_as_a_plain_figure_would():
    """st.plotly_chart sends plotly.io.to_json of the figure's to_dict(): the H100's 3.35 TB/s and the
    picked GPU's name box go out on the first draw and on each later one alike."""
    figure = memory_bandwidth_figure(_table(), ["H100-SXM5-80GB"])
    plain = go.Figure(figure.to_dict())
    for _ in range(2):
        sent = json.loads(plotly.io.to_json(figure.to_dict(), validate=False))
        assert sent == json.loads(plotly.io.to_json(plain.to_dict(), validate=False))
    assert sent["layout"]["annotations"][0]["text"] == "H100-SXM5-80GB"
    bandwidths_tbps = sent["data"][0]["y"]  # a typed array: eight bytes per float, base64
    assert list(np.frombuffer(base64.b64decode(bandwidths_tbps["bdata"]), dtype=bandwidths_tbps["dtype"])) == [
        3.35, 2.04, 1.01
    ]  # fmt: skip
