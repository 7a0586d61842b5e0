"""The Compare page's table pieces (ui.gpu_table), on hand-made fit answers."""

import pandas as pd

from calculators.memory.fit_matrix import GpuFit
from ui.gpu_table import ServingRow, readable_fit_rows, side_by_side, with_fit_columns


def _fit(gpu: str, verdict: str, headroom_gib: float, max_micro_batch: int | None, min_gpus: int | None) -> GpuFit:
    return GpuFit(
        gpu=gpu, gpu_memory_gib=80.0, fits=verdict != "does not fit", verdict=verdict, peak_gib=80.0 - headroom_gib,
        headroom_gib=headroom_gib, max_micro_batch=max_micro_batch, min_gpus=min_gpus,
    )  # fmt: skip


FITS = [_fit("H100", "fits", 12.5, 1026, 1), _fit("T4", "does not fit", -3.25, None, None)]


def test_empty_fit_answers_say_what_they_mean_in_the_memory_pages_words():
    rows = readable_fit_rows(FITS, zero=0)
    assert rows["H100"] == {
        "verdict": "fits", "headroom_gib": 12.5, "max_micro_batch": "1026", "min_gpus": "1", "stack_problem": "-"
    }  # fmt: skip
    assert rows["T4"]["max_micro_batch"] == "none fits"
    assert rows["T4"]["min_gpus"] == "needs ZeRO"  # without ZeRO every GPU holds a full copy
    assert readable_fit_rows(FITS, zero=3)["T4"]["min_gpus"] == "none"
    assert readable_fit_rows(FITS)["T4"]["min_gpus"] == "-"  # not a training run: no ZeRO to blame


def test_a_serving_row_writes_its_decode_speed_as_the_memory_page_does():
    # 166.7 tokens/s reads "167"; 12.34 reads "12.3"; no speed where the weights do not fit
    rows = readable_fit_rows(
        [
            ServingRow(gpu="H100", verdict="fits", headroom_gib=40.0, max_concurrency=64, max_context_len=8192,
                       decode_tokens_per_s=166.7, min_gpus=1),
            ServingRow(gpu="L4", verdict="tight", headroom_gib=0.5, max_concurrency=1, max_context_len=512,
                       decode_tokens_per_s=12.34, min_gpus=1),
            ServingRow(gpu="T4", verdict="does not fit", headroom_gib=-2.0, max_concurrency=0, max_context_len=0,
                       decode_tokens_per_s=None, min_gpus=None),
        ]
    )  # fmt: skip
    assert [rows[gpu]["decode_tokens_per_s"] for gpu in ("H100", "L4", "T4")] == ["167", "12.3", "does not fit"]
    assert rows["H100"]["max_concurrency"] == 64  # a count stays a number


def _figures(names: list[str]) -> pd.DataFrame:
    every = pd.DataFrame({"name": ["H100", "T4"], "memory_gb": [80.0, 16.0], "vendor": ["NVIDIA", "NVIDIA"]})
    return every[every["name"].isin(names)]


def test_the_table_puts_the_fit_answers_after_the_name_and_keeps_their_types_when_no_row_is_left():
    rows = readable_fit_rows(FITS, zero=0)
    table = with_fit_columns(_figures(["T4"]), rows, ["verdict", "headroom_gib", "max_micro_batch"])
    assert list(table.columns) == ["name", "verdict", "headroom_gib", "max_micro_batch", "memory_gb", "vendor"]
    assert table.iloc[0].to_list() == ["T4", "does not fit", -3.25, "none fits", 16.0, "NVIDIA"]
    empty = with_fit_columns(_figures([]), rows, ["verdict", "headroom_gib", "max_micro_batch"])
    assert len(empty) == 0
    assert pd.api.types.is_float_dtype(empty["headroom_gib"])  # a number column still
    assert pd.api.types.is_string_dtype(empty["max_micro_batch"])  # a text column, as with rows in it


def test_side_by_side_names_its_rows_for_a_person_and_writes_at_most_two_decimals():
    rows = {
        "H100": {"memory_bandwidth_tbps": 3.35, "fp8_tflops": 1979.0, "headroom_gib": 12.5},
        "A100": {"memory_bandwidth_tbps": 2.039, "fp8_tflops": float("nan"), "headroom_gib": -3.0},
    }
    side = side_by_side(rows, ["H100", "A100"], ["headroom_gib", "memory_bandwidth_tbps", "fp8_tflops"])
    assert list(side.columns) == ["H100", "A100"]
    assert side.to_dict("index") == {
        "headroom (GiB)": {"H100": "12.5", "A100": "-3"},
        "memory bandwidth (TB/s)": {"H100": "3.35", "A100": "2.04"},
        "FP8 TFLOPS": {"H100": "1,979", "A100": "-"},
    }
