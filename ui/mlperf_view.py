"""The Compare page's MLPerf Training section: published time-to-train on the GPUs looked at,
the time model's prediction beside it, and what reproducing each result on rented GPUs costs."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from calculators.validation.mlperf import (
    BENCHMARK_LABEL,
    RESULTS_SITE,
    MlperfRow,
    best_results,
    mlperf_table,
    ratio_groups,
)
from ui.axes import axis
from ui.layout import EMPTY_CELL
from ui.memo import remembered
from ui.palette import vendor_colour

FALLBACK_BENCHMARK = "llama2_70b_lora"  # the benchmark this app predicts most results of
# A sidebar model's name, lower case without punctuation, and the benchmark whose model it is.
BENCHMARK_OF_MODEL = (
    ("llama270b", "llama2_70b_lora"),
    ("llama31405b", "llama31_405b"),
    ("llama318b", "llama31_8b"),
    ("gpt3", "gpt3"),
    ("resnet50", "resnet"),
    ("bertlarge", "bert"),
)
MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "hexagon")


@st.cache_resource(show_spinner=False)
def _all_rows() -> list[MlperfRow]:
    """Every result with its prediction, worked out once: the data files do not change. Shared, not
    copied per call as st.cache_data would (unpickling 448 rows took 2 ms of every rerun of Compare):
    nothing writes to them."""
    return mlperf_table()


def _minutes(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _usd(value: float | None) -> str:
    return "no rental price" if value is None else f"${value:,.0f}"


def best_table(rows: list[MlperfRow], gpu_names: list[str]) -> pd.DataFrame:
    """One line per GPU, benchmark and scale (8 accelerators, the largest submitted)."""
    lines = []
    for name in gpu_names:
        for best in best_results(rows, name):
            row = best.row
            lines.append(
                {
                    "GPU": name,
                    "benchmark": BENCHMARK_LABEL.get(row.benchmark, row.benchmark),
                    "scale": best.scale,
                    "accelerators": row.accelerators,
                    "published (min)": _minutes(row.minutes_published),
                    "predicted (min)": _minutes(row.minutes_predicted),
                    "predicted / published": "-" if row.ratio is None else f"{row.ratio:.2f}",
                    "cost to reproduce (USD, on demand)": _usd(row.usd_to_reproduce),
                    "rented on": row.rented_on or "-",
                    "system": f"{row.submitter}: {row.system} ({row.round})",
                    "result": row.source,
                }
            )
    return pd.DataFrame(lines)


def scaling_figure(rows: list[MlperfRow], gpu_names: list[str], vendors: dict[str, str]) -> go.Figure:
    """Published time-to-train against accelerator count, one marker series per GPU."""
    figure = go.Figure()
    for index, name in enumerate(gpu_names):
        runs = sorted(
            (row for row in rows if row.accelerator == name and row.minutes_published), key=lambda r: r.accelerators
        )
        if not runs:
            continue
        figure.add_scatter(
            name=name,
            x=[row.accelerators for row in runs],
            y=[row.minutes_published for row in runs],
            mode="markers",
            marker=dict(color=vendor_colour(vendors.get(name, "")), symbol=MARKERS[index % len(MARKERS)], size=9),
            text=[f"{row.submitter}: {row.system} ({row.round})" for row in runs],
            hovertemplate="%{text}<br>%{x} accelerators: %{y:.1f} min<extra></extra>",
        )
    minutes = [row.minutes_published for row in rows if row.accelerator in gpu_names and row.minutes_published]
    counts = [row.accelerators for row in rows if row.accelerator in gpu_names and row.minutes_published]
    figure.update_layout(
        height=420,
        margin=dict(l=10, r=10, t=30, b=10),
        xaxis=axis(counts, "Accelerators"),
        yaxis=axis(minutes, "Time to train (min, published)"),
        legend=dict(orientation="h", yanchor="top", y=-0.2),
    )
    return figure


def sidebar_model_name(workload) -> str | None:
    """The sidebar's model (an image model's key, else the transformer's name), or None."""
    if workload is None:
        return None
    if workload.is_vision:
        return workload.vision.model.key
    return workload.spec.name if workload.spec else None


def default_benchmark(model_name: str | None, predicted: list[str]) -> str | None:
    """The benchmark of the sidebar's model when this app predicts it, else Llama 2 70B LoRA, else
    the first benchmark with predictions; None when none has any."""
    folded = "".join(ch for ch in (model_name or "").lower() if ch.isalnum())
    matching = next((benchmark for part, benchmark in BENCHMARK_OF_MODEL if part in folded), None)
    for candidate in (matching, FALLBACK_BENCHMARK):
        if candidate in predicted:
            return candidate
    return predicted[0] if predicted else None


def mlperf_section(gpu_names: list[str], vendors: dict[str, str], workload=None) -> None:
    """The section for `gpu_names` (catalogue names; `vendors` maps each to its vendor)."""
    st.subheader("MLPerf Training")
    rows = _all_rows()
    accelerators = {row.accelerator for row in rows}
    with_results = [name for name in gpu_names if name in accelerators]
    st.caption(
        "Published time-to-train of MLPerf Training rounds v3.1 to v5.1 (closed division, scored from the run "
        f"logs as MLCommons does: {RESULTS_SITE}), with this app's prediction for the same system and the cost of "
        "renting the same GPUs for the published time at today's cheapest on-demand price (hours x instances x "
        "price). GPT-3 and ResNet-50 were retired after v4.1 and v4.0."
    )
    if not with_results:
        st.info("None of these GPUs has an MLPerf Training result. Pick GPUs such as H100-SXM5-80GB or MI300X-192GB.")
        return
    # both built again only when the GPUs or the benchmark change, not on every change of the sidebar
    st.dataframe(
        remembered("mlperf_best_table", tuple(with_results), lambda: best_table(rows, with_results)),
        hide_index=True,
        width="stretch",
        column_config={"result": st.column_config.LinkColumn("result", display_text="open")},
        placeholder=EMPTY_CELL,
    )
    benchmarks = sorted({row.benchmark for row in rows if row.accelerator in with_results})
    predicted = [name for name in benchmarks if any(r.benchmark == name and r.minutes_predicted for r in rows)]
    default = default_benchmark(sidebar_model_name(workload), predicted)
    chosen = st.selectbox(
        "Benchmark for the chart",
        benchmarks,
        index=benchmarks.index(default) if default else 0,
        format_func=lambda name: BENCHMARK_LABEL.get(name, name),
        key="cmp_mlperf_benchmark",
    )
    figure_key = (chosen, tuple((name, vendors.get(name, "")) for name in with_results))
    picked_rows = [row for row in rows if row.benchmark == chosen]
    figure = remembered("mlperf_scaling_figure", figure_key, lambda: scaling_figure(picked_rows, with_results, vendors))
    st.plotly_chart(figure, width="stretch")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _why_not_predicted(rows: list[MlperfRow], benchmark: str, accelerator: str) -> str:
    """Why a group's results have no prediction: their reasons, each once."""
    reasons = {
        row.why_not
        for row in rows
        if row.benchmark == benchmark and (row.accelerator or row.accelerator_published) == accelerator and row.why_not
    }
    return "; ".join(sorted(reasons))


def group_frame(rows: list[MlperfRow]) -> pd.DataFrame:
    """One line per benchmark and accelerator: how many results, how many predicted ("-" with the
    reason where none is), and the ratio's median and spread."""
    lines = []
    for group in ratio_groups(rows):
        none = group.predicted == 0
        lines.append(
            {
                "benchmark": BENCHMARK_LABEL.get(group.benchmark, group.benchmark),
                "accelerator": group.accelerator,
                "results": group.results,
                "predicted": "-" if none else f"{group.predicted}",
                "median predicted / published": _ratio(group.median_ratio),
                "lowest": _ratio(group.low_ratio),
                "highest": _ratio(group.high_ratio),
                "not predicted because": (
                    _why_not_predicted(rows, group.benchmark, group.accelerator)
                    if group.predicted < group.results
                    else ""
                ),
            }
        )
    return pd.DataFrame(lines)


def mlperf_validation_section() -> None:
    """The Validation page's MLPerf section: predicted / published time-to-train grouped by
    benchmark and accelerator (median, lowest, highest), and every row with its assumptions."""
    st.header("MLPerf Training time-to-train")
    st.write(
        "Each language-model result of MLPerf Training v3.1 to v5.1 predicted as (sequences to converge at its "
        "global batch, from the reference convergence points) / global batch x the time model's step on the "
        "submitted GPUs in the layout NVIDIA's NeMo submissions use (or, for the HF Trainer + DeepSpeed "
        "submissions, the layout their own published config sets), plus the evaluations the rules run; "
        "ResNet-50 as epochs to converge x ImageNet at the vision time model's step. No coefficient is "
        "fitted to these results. Targets: Llama 2 70B LoRA on 8 GPUs within ±30% each, median within 15%. "
        "BERT-large waits for an encoder time model."
    )
    rows = _all_rows()
    st.dataframe(group_frame(rows), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    for benchmark in sorted({row.benchmark for row in rows}):
        members = [row for row in rows if row.benchmark == benchmark]
        with st.expander(f"{BENCHMARK_LABEL.get(benchmark, benchmark)}: {len(members)} results, assumptions"):
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "id": row.id,
                            "round": row.round,
                            "system": f"{row.submitter}: {row.system}",
                            "accelerator": row.accelerator or row.accelerator_published,
                            "accelerators": row.accelerators,
                            "published (min)": _minutes(row.minutes_published),
                            "predicted (min)": _minutes(row.minutes_predicted),
                            "predicted / published": _ratio(row.ratio),
                            "not predicted because": row.why_not or "",
                            "assumptions": "; ".join(row.assumptions),
                        }
                        for row in members
                    ]
                ),
                hide_index=True,
                width="stretch",
                placeholder=EMPTY_CELL,
            )
