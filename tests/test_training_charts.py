"""The training charts read at 800 px: the scaling chart's legend below it and its GPU axis at whole
decades, the Memory chart's capacity label on its own box, picked GPUs named beside their points."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings
from ui.charts import memory_bandwidth_figure, phase_breakdown_figure, scaling_figure, tflops_price_figure

# the review's Llama-3.1-8B run on 1 to 512 H100s: 36.8 h on one, halving with each doubling
GPUS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
HOURS = [36.8 / n for n in GPUS]


def test_the_scaling_chart_keeps_its_legend_off_the_right_axis_and_its_gpu_ticks_flat():
    figure = scaling_figure(GPUS, [7_549, 7_100, 7_000, 7_000, 4_800, 4_500, 4_400, 4_350, 4_300, 4_300], HOURS)
    assert figure.layout.legend.orientation == "h" and figure.layout.legend.y < 0
    assert list(figure.layout.xaxis.ticktext) == ["1", "10", "100", "1k"] and figure.layout.xaxis.tickangle == 0
    assert figure.layout.margin.t >= 40  # the top hours tick (50 h) has room above the plot


def test_the_capacity_line_label_sits_on_a_box_of_its_own():
    estimate = estimate_memory(get_preset("llama-3.2-1b"), TrainingSettings(micro_batch=2, seq_len=2048))
    (label,) = phase_breakdown_figure(estimate, 80).layout.annotations
    assert label.text == "GPU 80 GiB" and label.bgcolor and label.font.color == "red"


def test_the_memory_chart_keeps_a_fixed_left_margin_wide_enough_for_its_ticks_and_title():
    """No automargin pass on the y axis (the chart is redrawn on every sidebar change), so its margin
    is set: at least the 71 px Plotly's automargin gave ticks up to "160" and the title in Chromium."""
    estimate = estimate_memory(get_preset("llama-3.2-1b"), TrainingSettings(micro_batch=2, seq_len=2048))
    layout = phase_breakdown_figure(estimate, 80).layout
    assert layout.yaxis.automargin is False and layout.yaxis.title.text == "GiB per GPU"
    assert layout.margin.l >= 71


def test_the_memory_chart_built_without_plotlys_checks_passes_them():
    """phase_breakdown_figure skips Plotly's property checks (ui.charts.unchecked_figure): the same
    figure built with them is the same figure, so nothing it holds is misspelled or out of range."""
    for settings in (TrainingSettings(micro_batch=2, seq_len=2048), TrainingSettings(method="lora", zero=3, gpus=8)):
        figure = phase_breakdown_figure(estimate_memory(get_preset("llama-3.2-1b"), settings), 24)
        checked = go.Figure(figure.to_dict())
        assert checked.to_dict() == figure.to_dict()
        assert [bar.type for bar in checked.data] == ["bar"] * len(checked.data) and len(checked.data) >= 4
        assert checked.layout.template.layout.font.color == "#2a3f5f"  # Plotly's default template, as before


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
