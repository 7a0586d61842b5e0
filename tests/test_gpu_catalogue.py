"""Tests for the accelerator catalogue in data/gpus.csv and its parser."""

from __future__ import annotations

import csv
import datetime as dt
import random

import pytest

from calculators.csv_rows import csv_text as write_csv_text
from calculators.gpu_catalogue import (
    COLUMNS,
    DEFAULT_CATALOGUE_PATH,
    CatalogueError,
    GpuSpec,
    find_gpu,
    load_gpu_catalogue,
    parse_gpu_csv,
    parse_gpu_rows,
)

CATALOGUE = load_gpu_catalogue()
BY_NAME = {gpu.name: gpu for gpu in CATALOGUE}


def csv_text(rows: list[dict[str, str]], columns: tuple[str, ...] | list[str] = COLUMNS) -> str:
    """Write rows as CSV text with the given header."""
    return write_csv_text(rows, columns)


def catalogue_rows() -> list[dict[str, str]]:
    """The raw rows of data/gpus.csv, as an uploaded file would give them."""
    with DEFAULT_CATALOGUE_PATH.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def good_row(**changes: str) -> dict[str, str]:
    """A valid raw row (the A100 SXM 80GB) with some cells replaced."""
    row = next(row for row in catalogue_rows() if row["name"] == "A100-SXM4-80GB")
    row.update(changes)
    return row


# --- the shipped catalogue ---------------------------------------------------


def test_header_is_the_column_order():
    with DEFAULT_CATALOGUE_PATH.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert tuple(header) == COLUMNS == tuple(GpuSpec.model_fields)


def test_every_row_validates_and_there_are_enough():
    assert len(CATALOGUE) >= 40
    assert all(isinstance(gpu, GpuSpec) for gpu in CATALOGUE)


def test_names_are_unique_ignoring_case_and_have_no_commas():
    names = [gpu.name for gpu in CATALOGUE]
    assert len({name.casefold() for name in names}) == len(names)
    assert not [name for name in names if "," in name]


def test_every_row_has_a_source_and_an_as_of_date():
    for gpu in CATALOGUE:
        assert gpu.source.strip(), gpu.name
        assert dt.date(2017, 1, 1) <= gpu.as_of <= dt.date(2035, 12, 31), gpu.name


def test_catalogue_covers_every_category_and_the_main_vendors():
    assert {gpu.category for gpu in CATALOGUE} == {"consumer", "workstation", "datacenter", "cloud"}
    assert {"NVIDIA", "AMD", "Intel", "Google", "AWS"} <= {gpu.vendor for gpu in CATALOGUE}


@pytest.mark.parametrize(
    "name",
    [
        "RTX-3090-24GB",
        "RTX-4090-24GB",
        "RTX-5090-32GB",
        "RTX-A6000-48GB",
        "RTX-6000-Ada-48GB",
        "RTX-PRO-6000-Blackwell-96GB",
        "V100-SXM2-32GB",
        "A100-SXM4-80GB",
        "H100-SXM5-80GB",
        "H200-SXM-141GB",
        "B200-SXM-180GB",
        "GB200 (per B200 GPU)",
        "B300-SXM-288GB",
        "L4-24GB",
        "L40S-48GB",
        "MI250X-128GB",
        "MI300X-192GB",
        "MI325X-256GB",
        "MI355X-288GB",
        "Gaudi2-96GB",
        "Gaudi3-128GB",
        "TPU-v5e",
        "TPU-v5p",
        "TPU-v6e",
        "Trainium1-32GB",
        "Trainium2-96GB",
    ],
)
def test_expected_accelerators_are_listed(name):
    assert name in BY_NAME


def test_h100_sxm_matches_the_datasheet_dense_figures():
    h100 = BY_NAME["H100-SXM5-80GB"]
    assert h100.memory_gb == 80
    assert h100.memory_bandwidth_tbps == 3.35
    assert h100.bf16_tflops == 989  # the datasheet's 1979 is with sparsity
    assert h100.fp16_tflops == 989
    assert h100.fp8_tflops == 1979
    assert h100.tf32_tflops == pytest.approx(494, abs=0.5)
    assert h100.fp32_tflops == 67
    assert h100.tdp_w == 700
    assert (h100.interconnect, h100.interconnect_gbps, h100.pcie_gen) == ("NVLink4", 900, 5)


def test_a100_sxm_80gb_matches_the_datasheet():
    a100 = BY_NAME["A100-SXM4-80GB"]
    assert a100.memory_gb == 80
    assert a100.memory_bandwidth_tbps == pytest.approx(2.0, abs=0.05)
    assert a100.memory_bandwidth_tbps == 2.039
    assert a100.bf16_tflops == 312
    assert a100.fp32_tflops == 19.5
    assert a100.tdp_w == 400
    assert a100.fp8_tflops is None  # Ampere has no FP8


def test_mi300x_matches_amd_dense_figures():
    mi300x = BY_NAME["MI300X-192GB"]
    assert mi300x.memory_gb == 192
    assert mi300x.memory_bandwidth_tbps == 5.3
    assert mi300x.bf16_tflops == 1307.4


def test_rtx_4090_matches_the_ada_whitepaper():
    rtx4090 = BY_NAME["RTX-4090-24GB"]
    assert rtx4090.memory_gb == 24
    assert rtx4090.memory_bandwidth_tbps == 1.008
    assert rtx4090.fp32_tflops == 82.6
    assert rtx4090.category == "consumer"
    assert rtx4090.price_kind == "msrp" and rtx4090.price_usd == 1599


def test_h200_memory():
    h200 = BY_NAME["H200-SXM-141GB"]
    assert h200.memory_gb == 141
    assert h200.memory_bandwidth_tbps == 4.8


def test_dense_tflops_maps_each_precision():
    h100 = BY_NAME["H100-SXM5-80GB"]
    assert h100.dense_tflops("bf16") == 989
    assert h100.dense_tflops("FP8") == 1979
    assert h100.dense_tflops("fp32") == 67
    assert h100.dense_tflops("int8") == h100.int8_tops
    assert BY_NAME["V100-SXM2-32GB"].dense_tflops("bf16") is None
    with pytest.raises(ValueError, match="unknown precision"):
        h100.dense_tflops("fp64")


# --- invariants that catch sparse figures slipping in ------------------------


def pairs(low: str, high: str) -> list[tuple[str, float, float]]:
    """(name, low rate, high rate) for every GPU that publishes both rates."""
    rows = [(gpu.name, gpu.dense_tflops(low), gpu.dense_tflops(high)) for gpu in CATALOGUE]
    return [(name, a, b) for name, a, b in rows if a is not None and b is not None]


def test_tf32_is_at_most_bf16():
    assert not [name for name, tf32, bf16 in pairs("tf32", "bf16") if tf32 > bf16]


def test_fp16_is_at_most_bf16():
    assert not [name for name, fp16, bf16 in pairs("fp16", "bf16") if fp16 > bf16]


def test_fp8_is_between_one_and_two_times_bf16():
    # A sparse FP8 figure next to a dense BF16 one would show up as 4x.
    # Trainium3 is the one chip whose MXFP8 rate really is 3.75x its BF16 rate.
    # 2.05 allows datasheet rounding (L40S: FP8 733 next to BF16 362.05).
    wrong = [name for name, bf16, fp8 in pairs("bf16", "fp8") if not bf16 <= fp8 <= 2.05 * bf16]
    assert wrong == ["Trainium3-144GB"]


def test_nvidia_fp16_and_bf16_rates_are_equal():
    wrong = [name for name, fp16, bf16 in pairs("fp16", "bf16") if BY_NAME[name].vendor == "NVIDIA" and fp16 != bf16]
    assert not wrong


def test_known_sparse_datasheet_figures_are_not_used():
    sparse_bf16 = {"H100-SXM5-80GB": 1979, "A100-SXM4-80GB": 624, "B200-SXM-180GB": 4500, "L40S-48GB": 733}
    for name, sparse in sparse_bf16.items():
        assert BY_NAME[name].bf16_tflops == pytest.approx(sparse / 2, rel=0.02), name


def test_prices_have_a_kind_and_figures_are_plausible():
    for gpu in CATALOGUE:
        assert (gpu.price_usd is None) == (gpu.price_kind == ""), gpu.name
        assert gpu.memory_bandwidth_tbps < 20, gpu.name
        assert gpu.memory_gb <= 512, gpu.name
        assert gpu.pcie_gen is None or 3 <= gpu.pcie_gen <= 6, gpu.name


# --- bad input is a CatalogueError naming the row and field ------------------


def upload(*rows: dict[str, str], columns: tuple[str, ...] | list[str] = COLUMNS) -> list[GpuSpec]:
    """Parse rows as an uploaded CSV file would arrive."""
    return parse_gpu_csv(csv_text(list(rows), columns))


def test_a_good_upload_parses():
    specs = upload(good_row(), good_row(name="My-GPU", memory_gb=" 48 ", price_usd="", price_kind=""))
    assert [spec.name for spec in specs] == ["A100-SXM4-80GB", "My-GPU"]
    assert specs[1].memory_gb == 48


def test_the_whole_catalogue_round_trips_as_an_upload():
    assert tuple(parse_gpu_csv(DEFAULT_CATALOGUE_PATH.read_text(encoding="utf-8"))) == CATALOGUE


def test_negative_memory_names_row_gpu_and_field():
    with pytest.raises(CatalogueError) as caught:
        upload(good_row(name="First"), good_row(name="Bad-GPU", memory_gb="-1"))
    message = str(caught.value)
    assert message.startswith("uploaded CSV row 2 (Bad-GPU): memory_gb: Input should be greater than 0")
    assert "\n" not in message


def test_text_in_a_number_column_names_the_field_and_value():
    with pytest.raises(CatalogueError, match=r"row 1 \(A100-SXM4-80GB\): tdp_w: .*valid number.*'abc'"):
        upload(good_row(tdp_w="abc"))


def test_empty_required_cell_is_reported():
    with pytest.raises(CatalogueError, match=r"row 1 \(A100-SXM4-80GB\): memory_bandwidth_tbps: required"):
        upload(good_row(memory_bandwidth_tbps="  "))


def test_missing_column_is_reported():
    columns = [column for column in COLUMNS if column != "tdp_w"]
    with pytest.raises(CatalogueError, match=r"uploaded CSV header: missing column 'tdp_w'"):
        upload(good_row(), columns=columns)


def test_unknown_column_is_reported():
    with pytest.raises(CatalogueError, match=r"header: unknown column 'colour'"):
        upload(good_row(), columns=[*COLUMNS, "colour"])


def test_duplicate_name_is_reported_ignoring_case():
    with pytest.raises(CatalogueError, match=r"row 2 \(a100-sxm4-80gb\): name: duplicate of row 1"):
        upload(good_row(), good_row(name="a100-sxm4-80gb"))


@pytest.mark.parametrize("text", ["", "   \n\n", b"", "\ufeff"])
def test_empty_file_is_reported(text):
    with pytest.raises(CatalogueError, match="empty"):
        parse_gpu_csv(text)


def test_header_without_rows_is_reported():
    with pytest.raises(CatalogueError, match="no GPU rows"):
        parse_gpu_csv(",".join(COLUMNS) + "\n")


def test_short_and_long_rows_are_reported():
    header = ",".join(COLUMNS)
    with pytest.raises(CatalogueError, match=r"row 1 \(X\): 2 cells but the header has 24 columns"):
        parse_gpu_csv(f"{header}\nX,NVIDIA\n")
    too_long = csv_text([good_row()]).strip() + ",extra\n"
    with pytest.raises(CatalogueError, match=r"row 1 \(A100-SXM4-80GB\): 25 cells"):
        parse_gpu_csv(too_long)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"category": "gaming"}, "category"),
        ({"price_usd": "100", "price_kind": ""}, "price_kind"),
        ({"price_usd": "", "price_kind": "msrp"}, "price_kind"),
        ({"as_of": "yesterday"}, "as_of"),
        ({"launch_year": "1999"}, "launch_year"),
        ({"launch_year": "9" * 5000}, "launch_year"),
        ({"memory_gb": "1e400"}, "memory_gb"),
        ({"fp32_tflops": "nan"}, "fp32_tflops"),
        ({"source": ""}, "source"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_cells_name_the_field(changes, field):
    with pytest.raises(CatalogueError, match=rf"uploaded CSV row 1\b.*: {field}: "):
        upload(good_row(**changes))


def test_huge_numbers_are_fine_when_finite():
    (spec,) = upload(good_row(memory_gb="1e300", price_usd="123456789012", price_kind="street"))
    assert spec.memory_gb == 1e300


def test_parse_gpu_rows_reports_rows_from_1_with_the_default_origin():
    with pytest.raises(CatalogueError, match=r"^gpus.csv row 2 \(Y\): memory_gb: "):
        parse_gpu_rows([good_row(name="X"), good_row(name="Y", memory_gb="0")])
    with pytest.raises(CatalogueError, match="no GPU rows"):
        parse_gpu_rows([])
    with pytest.raises(CatalogueError, match="row ends before"):
        parse_gpu_rows([{**good_row(), "notes": None}])


def test_missing_catalogue_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(CatalogueError, match="nope.csv"):
        load_gpu_catalogue(missing)


def test_random_garbage_only_ever_raises_catalogue_error():
    rng = random.Random(1234)
    alphabet = 'abc,"\n\r\t 01-.e9x\x00\ufeff;' + "".join(COLUMNS[:5])
    header = ",".join(COLUMNS)
    good = csv_text([good_row()])
    for _ in range(400):
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        cells = good.splitlines()[1].split(",")
        cells[rng.randrange(len(cells))] = noise.replace(",", "").replace("\n", "")
        for text in (noise, f"{header}\n{noise}", f"{header}\n{','.join(cells)}"):
            try:
                parse_gpu_csv(text)
            except CatalogueError:
                pass


# --- find_gpu ----------------------------------------------------------------


def test_find_gpu_is_case_insensitive():
    assert find_gpu("h100-sxm5-80gb") is BY_NAME["H100-SXM5-80GB"]
    assert find_gpu("  MI300X-192GB ").name == "MI300X-192GB"


def test_find_gpu_suggests_close_names():
    with pytest.raises(KeyError) as caught:
        find_gpu("H100-SXM-80GB")
    message = str(caught.value)
    assert "H100-SXM5-80GB" in message
    assert message.count(",") <= 2  # at most 3 suggestions


def test_find_gpu_searches_a_given_catalogue():
    mine = upload(good_row(name="Lab-Card"))
    assert find_gpu("lab-card", mine).name == "Lab-Card"
    with pytest.raises(KeyError, match="unknown GPU"):
        find_gpu("A100-SXM4-80GB", mine)
