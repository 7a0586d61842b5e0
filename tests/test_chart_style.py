"""One chart style: readable axis ticks and one colour per thing (ui/axes.py, ui/palette.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings
from ui.axes import axis, log_tick_values, tick_label
from ui.charts import hours_usd_layout, scaling_figure, time_cost_figure
from ui.memory_chart import phase_breakdown_chart
from ui.palette import COMPONENT_COLOUR, VENDOR_COLOUR


def test_usd_ticks_read_as_dollars_in_increasing_order():
    # $52 to $610 spans decades 10^1 .. 10^3: ticks 50, 100, 200, 500 inside, 1000 just beyond
    assert log_tick_values(52, 610) == [50, 100, 200, 500, 1000]
    assert axis([52, 610], "USD", "usd")["ticktext"] == ["$50", "$100", "$200", "$500", "$1k"]


def test_hours_over_four_decades_tick_only_at_powers_of_ten():
    # 0.1 h .. 140 h: decades -1 .. 3 are more than three, so 1-2-5 would crowd: 0.1, 1, 10, 100, 1,000
    assert axis([0.1, 140], "Hours", "hours")["ticktext"] == ["0.1 h", "1 h", "10 h", "100 h", "1,000 h"]
    assert tick_label(25_000, "hours") == "25k h"


def test_a_narrow_range_is_drawn_on_a_linear_axis_from_zero():
    # 11.37k-11.39k tokens/s is flat: linear, from 0 past 1.1 x the largest (12,529) to the tick
    # above it: 12,529 / 6 = 2,088, the next 1-2-5 step is 5,000
    layout = axis([11_370, 11_390], "tokens/s")
    assert layout["type"] == "linear" and layout["range"] == pytest.approx([0, 15_000])
    assert layout["ticktext"] == ["0", "5k", "10k", "15k"]


def test_a_linear_axis_writes_its_ticks_out_in_the_unit():
    # $0.52 to $0.91 (a plan front): top 1.001 / 6 ticks = 0.167, the next 1-2-5 step is 0.2, so
    # 0 to 1.2 in steps of 0.2 written as dollars, never Plotly's SI "$800m"
    usd = axis([0.52, 0.91], "USD", "usd")
    assert usd["ticktext"] == ["$0", "$0.2", "$0.4", "$0.6", "$0.8", "$1", "$1.2"]
    assert usd["range"] == [0, 1.2] and "tickformat" not in usd
    # 5.46 to 28.23 ms: top 31.05 / 6 = 5.2, step 10
    assert axis([5.46, 28.23], "TPOT", "ms")["ticktext"] == ["0 ms", "10 ms", "20 ms", "30 ms", "40 ms"]


def test_the_plan_and_cost_axes_come_from_the_points_drawn():
    rows = pd.DataFrame(
        {
            "pricing": ["on demand", "spot"],
            "gpu": ["H100", "H100"],
            "provider": ["AWS", "AWS"],
            "instance": ["p5", "p5"],
            "hours": [3.0, 300.0],
            "usd": [40.0, 900.0],
            "pareto": [True, True],
        }
    )
    figure = time_cost_figure(rows)
    hours_usd_layout(figure, 400)
    # 3 h .. 300 h: decades 0 .. 3, so 1-2-5 ticks; 2 h is the nearest below 3 h and 500 h above 300 h
    assert list(figure.layout.xaxis.ticktext) == ["2 h", "5 h", "10 h", "20 h", "50 h", "100 h", "200 h", "500 h"]
    # $40 .. $900: $20 below, $1k above
    assert list(figure.layout.yaxis.ticktext) == ["$20", "$50", "$100", "$200", "$500", "$1k"]


def test_a_memory_component_keeps_its_colour_between_two_states():
    spec = get_preset("llama-3.2-1b")
    full = estimate_memory(spec, TrainingSettings(micro_batch=2, seq_len=2048))
    lora = estimate_memory(spec, TrainingSettings(micro_batch=2, seq_len=2048, method="lora"))
    scales = [
        phase_breakdown_chart(estimate, 80).spec["layer"][0]["encoding"]["color"]["scale"] for estimate in (full, lora)
    ]
    colours = [dict(zip(scale["domain"], scale["range"], strict=True)) for scale in scales]
    shared = colours[0].keys() & colours[1].keys()
    assert {"Activations", "Weights"} <= shared
    assert all(colours[0][name] == colours[1][name] for name in shared)
    assert colours[0]["Weights"] == "#1f77b4" and colours[0]["Activations"] == "#2ca02c"  # the palette's
    assert len(set(COMPONENT_COLOUR.values())) == len(COMPONENT_COLOUR)  # no two components alike
    assert VENDOR_COLOUR["NVIDIA"] == "#76b900"


def test_the_scaling_chart_draws_a_flat_throughput_flat():
    figure = scaling_figure([8, 16, 32, 64], [11_390, 11_385, 11_380, 11_370], [40.0, 20.0, 10.0, 5.0])
    assert figure.layout.yaxis.type == "linear" and figure.layout.yaxis.range[0] == 0
    assert figure.layout.yaxis2.type == "linear"  # 5-40 h is under a decade
