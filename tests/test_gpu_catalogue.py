"""Tests for the accelerator catalogue in data/gpus.csv and its parser."""

from __future__ import annotations

import csv
import datetime as dt
import random

import pytest

from calculators.hardware.catalogue import (
    COLUMNS,
    DEFAULT_CATALOGUE_PATH,
    CatalogueError,
    GpuSpec,
    find_gpu,
    load_gpu_catalogue,
    parse_gpu_csv,
    parse_gpu_rows,
)
from calculators.hardware.csv_rows import csv_text as write_csv_text

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


def sparse(figure: float) -> float:
    """The dense rate of a datasheet figure quoted with 2:4 sparsity (the catalogue stores dense)."""
    return figure / 2


# Figures typed from the vendors' own documents, not read from data/gpus.csv:
#   H100, H200: https://resources.nvidia.com/en-us-gpu-resources/h100-datasheet-24306 and
#     https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446 (SXM columns)
#   A100: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/a100-80gb-datasheet-update-nvidia-us-1521051-r2-web.pdf
#   V100: https://images.nvidia.com/content/technologies/volta/pdf/tesla-volta-v100-datasheet-letter-fnl-web.pdf
#   T4: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet.pdf
#   L4: https://nvdam.widen.net/s/rvq98gbwsw/l4-datasheet-2595652
#   L40S: https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413 ; L40: https://www.nvidia.com/en-us/data-center/l40/
#   A40: https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf
#   RTX 4090: https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf (appendix)
#   MI300X: https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html
#   MI355X: https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html
#   TPU v5e: https://docs.cloud.google.com/tpu/docs/v5e
DATASHEETS: dict[str, dict[str, float]] = {
    "H100-SXM5-80GB": {
        "memory_gb": 80,
        "memory_bandwidth_tbps": 3.35,
        "fp32_tflops": 67,
        "tf32_tflops": sparse(989),
        "bf16_tflops": sparse(1979),
        "fp16_tflops": sparse(1979),
        "fp8_tflops": sparse(3958),
        "int8_tops": sparse(3958),
        "tdp_w": 700,
        "interconnect_gbps": 900,
    },
    "H200-SXM-141GB": {
        "memory_gb": 141,
        "memory_bandwidth_tbps": 4.8,
        "fp32_tflops": 67,
        "bf16_tflops": sparse(1979),
        "fp8_tflops": sparse(3958),
        "tdp_w": 700,
        "interconnect_gbps": 900,
    },
    "A100-SXM4-80GB": {
        "memory_gb": 80,
        "memory_bandwidth_tbps": 2.039,
        "fp32_tflops": 19.5,
        "tf32_tflops": 156,
        "bf16_tflops": 312,
        "fp16_tflops": 312,
        "int8_tops": 624,
        "tdp_w": 400,
        "interconnect_gbps": 600,
    },
    "A100-PCIe-80GB": {"memory_gb": 80, "memory_bandwidth_tbps": 1.935, "bf16_tflops": 312, "tdp_w": 300},
    "V100-SXM2-16GB": {
        "memory_gb": 16,
        "memory_bandwidth_tbps": 0.9,
        "fp32_tflops": 15.7,
        "fp16_tflops": 125,
        "tdp_w": 300,
        "interconnect_gbps": 300,
    },
    "V100-PCIe-16GB": {
        "memory_gb": 16,
        "memory_bandwidth_tbps": 0.9,
        "fp32_tflops": 14,
        "fp16_tflops": 112,
        "tdp_w": 250,
    },
    "T4-16GB": {
        "memory_gb": 16,
        "memory_bandwidth_tbps": 0.32,
        "fp32_tflops": 8.1,
        "fp16_tflops": 65,
        "int8_tops": 130,
        "tdp_w": 70,
    },
    "L4-24GB": {
        "memory_gb": 24,
        "memory_bandwidth_tbps": 0.3,
        "fp32_tflops": 30.3,
        "tf32_tflops": sparse(120),
        "bf16_tflops": sparse(242),
        "fp8_tflops": sparse(485),
        "int8_tops": sparse(485),
        "tdp_w": 72,
    },
    "L40S-48GB": {
        "memory_gb": 48,
        "memory_bandwidth_tbps": 0.864,
        "fp32_tflops": 91.6,
        "tf32_tflops": 183,
        "bf16_tflops": 362.05,
        "fp16_tflops": 362.05,
        "fp8_tflops": 733,
        "tdp_w": 350,
    },
    "L40-48GB": {
        "memory_gb": 48,
        "memory_bandwidth_tbps": 0.864,
        "fp32_tflops": 90.5,
        "tf32_tflops": 90.5,
        "bf16_tflops": 181.05,
        "fp8_tflops": 362,
        "int8_tops": 362,
        "tdp_w": 300,
    },
    "A40-48GB": {
        "memory_gb": 48,
        "memory_bandwidth_tbps": 0.696,
        "fp32_tflops": 37.4,
        "tf32_tflops": 74.8,
        "bf16_tflops": 149.7,
        "int8_tops": 299.3,
        "tdp_w": 300,
        "interconnect_gbps": 112.5,
    },
    # GeForce: the catalogue takes the rates with FP32 accumulate (what training uses);
    # the whitepaper lists 165.2 dense / 330.4 sparse for FP16 and BF16 with FP32 accumulate.
    "RTX-4090-24GB": {
        "memory_gb": 24,
        "memory_bandwidth_tbps": 1.008,
        "fp32_tflops": 82.6,
        "tf32_tflops": 82.6,
        "bf16_tflops": 165.2,
        "fp16_tflops": 165.2,
        "fp8_tflops": 330.3,
        "int8_tops": 660.6,
        "tdp_w": 450,
    },
    "MI300X-192GB": {
        "memory_gb": 192,
        "memory_bandwidth_tbps": 5.3,
        "fp32_tflops": 163.4,
        "tf32_tflops": 653.7,
        "bf16_tflops": 1307.4,
        "fp16_tflops": 1307.4,
        "fp8_tflops": 2614.9,
        "int8_tops": 2614.9,
        "tdp_w": 750,
    },
    "MI355X-288GB": {"memory_gb": 288, "memory_bandwidth_tbps": 8.0, "fp32_tflops": 157.3, "tdp_w": 1400},
    "TPU-v5e": {"memory_gb": 16, "memory_bandwidth_tbps": 0.819, "bf16_tflops": 197},
}


@pytest.mark.parametrize("name", DATASHEETS)
def test_catalogue_matches_the_vendor_datasheet(name):
    """Each figure equals the vendor's datasheet (links above DATASHEETS) to its rounding.

    Sparse datasheet figures are halved by `sparse`; a tolerance of 0.1% covers vendors
    rounding the dense figure (H100: 1979 / 2 = 989.5, the catalogue keeps NVIDIA's 989)
    and still catches a sparse figure or a typo."""
    gpu = BY_NAME[name]
    for field, datasheet in DATASHEETS[name].items():
        assert getattr(gpu, field) == pytest.approx(datasheet, rel=1e-3), f"{name} {field}"


def test_at_least_eight_gpus_are_checked_against_datasheets():
    assert len(DATASHEETS) >= 8


def test_catalogue_facts_beyond_the_figures():
    h100 = BY_NAME["H100-SXM5-80GB"]
    assert (h100.interconnect, h100.pcie_gen) == ("NVLink4", 5)
    rtx4090 = BY_NAME["RTX-4090-24GB"]
    assert rtx4090.category == "consumer"
    assert rtx4090.price_kind == "msrp" and rtx4090.price_usd == 1599  # NVIDIA launch MSRP, Oct 2022
    assert BY_NAME["A100-SXM4-80GB"].fp8_tflops is None  # Ampere has no FP8


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


@pytest.mark.parametrize(
    ("field", "bound", "unit"),
    [
        ("memory_gb", "100000", "GB"),
        ("memory_bandwidth_tbps", "1000", "TB/s"),
        ("bf16_tflops", "1e+06", "TFLOPS"),
        ("int8_tops", "1e+06", "TOPS"),
        ("tdp_w", "100000", "W"),
        ("interconnect_gbps", "1e+06", "GB/s"),
        ("price_usd", "1e+09", "USD"),
    ],
)
def test_absurd_figures_are_refused_naming_the_field_and_the_bound(field, bound, unit):
    kind = {"price_kind": "street"} if field == "price_usd" else {}
    with pytest.raises(CatalogueError) as caught:
        upload(good_row(**{field: "1e308"}, **kind))
    assert (
        str(caught.value)
        == f"uploaded CSV row 1 (A100-SXM4-80GB): {field}: must be at most {bound} {unit} (got '1e308')"
    )


def test_figures_at_the_bounds_are_accepted():
    row = good_row(memory_gb="100000", memory_bandwidth_tbps="1000", bf16_tflops="1000000", tdp_w="100000")
    (spec,) = upload(row | {"price_usd": "1000000000", "price_kind": "street"})
    assert (spec.memory_gb, spec.memory_bandwidth_tbps, spec.bf16_tflops) == (100_000, 1_000, 1_000_000)
    assert (spec.tdp_w, spec.price_usd) == (100_000, 1e9)


def test_a_control_character_in_a_text_cell_is_refused():
    with pytest.raises(CatalogueError) as caught:
        upload(good_row(name="Lab\x7fCard"))
    assert (
        str(caught.value)
        == "uploaded CSV row 1 (Lab?Card): name: control character U+007F is not allowed (got 'Lab\\x7fCard')"
    )
    with pytest.raises(CatalogueError, match=r"row 1 \(A100-SXM4-80GB\): notes: control character U\+0009"):
        upload(good_row(notes="two\tcolumns"))


def test_the_gpu_form_says_a_zero_memory_must_be_greater_than_0():
    """The Compare page's form: 0 in a required figure is a mistake, 0 elsewhere means unknown."""
    from ui.user_gpus import _row_from_form

    figures = {"memory_gb": 0.0, "memory_bandwidth_tbps": 1.0, "bf16_tflops": 0.0, "tdp_w": 0.0, "price_usd": 0.0}
    with pytest.raises(CatalogueError) as caught:
        parse_gpu_rows([_row_from_form("Lab-Card", figures)], origin="your GPU")
    assert str(caught.value) == "your GPU row 1 (Lab-Card): memory_gb: Input should be greater than 0 (got '0')"
    (gpu,) = parse_gpu_rows([_row_from_form("Lab-Card", figures | {"memory_gb": 48.0})], origin="your GPU")
    assert (gpu.memory_gb, gpu.bf16_tflops, gpu.tdp_w, gpu.price_usd) == (48, None, None, None)


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
