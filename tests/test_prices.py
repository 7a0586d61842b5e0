"""Tests for the cloud price sheet in data/cloud_prices.csv and its parser."""

from __future__ import annotations

import csv
import datetime as dt
import math
import random

import pytest

from calculators.cost.prices import (
    COLUMNS,
    DEFAULT_PRICES_PATH,
    REQUIRED_COLUMNS,
    CloudPrice,
    PriceCatalogueError,
    load_prices,
    parse_price_csv,
    parse_price_rows,
    prices_as_of,
    usd_per_gpu_hour,
)
from calculators.cost.unpriced import unpriced_gpus, unpriced_reasons
from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.hardware.csv_rows import csv_text as write_csv_text

PRICES = load_prices()
GPU_NAMES = {gpu.name for gpu in load_gpu_catalogue()}


def raw_rows() -> list[dict[str, str]]:
    with DEFAULT_PRICES_PATH.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def csv_text(rows: list[dict[str, str]], columns: tuple[str, ...] | list[str] = COLUMNS) -> str:
    """Write rows as CSV text with the given header."""
    return write_csv_text(rows, columns)


def good_row(**changes: str) -> dict[str, str]:
    """A valid raw row (AWS p5.48xlarge) with some cells replaced."""
    row = next(row for row in raw_rows() if row["instance_type"] == "p5.48xlarge")
    return row | changes


def find(instance_type: str) -> CloudPrice:
    return next(price for price in PRICES if price.instance_type == instance_type)


# --- the shipped sheet -----------------------------------------------------------------


def test_header_is_the_column_order():
    with DEFAULT_PRICES_PATH.open(newline="", encoding="utf-8") as handle:
        assert tuple(next(csv.reader(handle))) == COLUMNS


def test_every_row_validates_and_at_least_six_providers_remain():
    assert len(PRICES) >= 100
    assert all(isinstance(price, CloudPrice) for price in PRICES)
    assert len({price.provider for price in PRICES}) >= 6


def test_every_gpu_is_a_catalogue_name():
    assert {price.gpu for price in PRICES} <= GPU_NAMES


def test_every_row_has_a_source_and_an_iso_date():
    for row in raw_rows():
        assert row["source"].strip()
        assert dt.date.fromisoformat(row["as_of"])


def test_spot_rows_have_a_rate_and_others_none():
    for price in PRICES:
        assert (price.spot_usd_per_hour is None) == (price.interruptions_per_hour is None), price.instance_type


def test_spot_is_never_dearer_than_on_demand_in_the_shipped_sheet():
    for price in PRICES:
        if price.spot_usd_per_hour is not None:
            assert price.spot_usd_per_hour < price.on_demand_usd_per_hour, price.instance_type


def test_flagged_gcp_rows_are_fixed_or_dropped():
    # a2-ultragpu: replaced by the GCP list price (us-central1); a4-highgpu-8g and the GPU-only L4 dropped.
    assert find("a2-ultragpu-1g").on_demand_usd_per_hour == pytest.approx(5.0688, abs=1e-4)
    assert find("a2-ultragpu-8g").on_demand_usd_per_hour == pytest.approx(40.5504, abs=1e-4)
    types = {price.instance_type for price in PRICES}
    assert "a4-highgpu-8g" not in types and "(attachable L4, GPU-only)" not in types


def test_gpu_mappings_follow_the_real_hardware():
    assert find("p5.48xlarge").gpu == "H100-SXM5-80GB"
    assert find("p4d.24xlarge").gpu == "A100-SXM4-40GB"
    assert find("gpu_8x_a100").gpu == "A100-SXM4-40GB"  # Lambda: 8x A100 (40 GB SXM4)
    assert find("gpu_1x_a100").gpu == "A100-PCIe-40GB"  # Lambda: 1x A100 (40 GB PCIe)
    assert find("BM.GPU3.8").gpu == "V100-SXM2-16GB"


def test_aws_spot_advisor_band_becomes_an_hourly_rate():
    # p5.48xlarge us-west-2: band 5-10%/month, midpoint 7.5%: -ln(1 - 0.075) / 730 h = 1.068e-4 per hour.
    assert find("p5.48xlarge").interruptions_per_hour == pytest.approx(-math.log(0.925) / 730, rel=1e-2)


def test_other_providers_use_the_trace_default():
    assert find("gpu-h100-sxm_8gpu-128vcpu-1600gb").interruptions_per_hour == 0.5


def test_usd_per_gpu_hour_divides_the_instance_price():
    p5 = find("p5.48xlarge")
    assert usd_per_gpu_hour(p5) == pytest.approx(55.04 / 8)  # 6.88
    assert usd_per_gpu_hour(p5, spot=True) == pytest.approx(p5.spot_usd_per_hour / 8)
    assert usd_per_gpu_hour(find("gpu_8x_h100_sxm5"), spot=True) is None


def test_rows_for_gb200_and_gaudi2_price_one_gpu_hour_by_hand():
    # CoreWeave prices a GB200 NVL72 node of 4 GPUs at $42.00/h: $10.50 per GPU-hour, the same
    # figure its page gives for one GB200; Spheron a Superchip (2 GPUs) at $9.08/h: $4.54;
    # Shadeform (Denvr) 8 Gaudi2 at $8.80/h: $1.10. (A Seeweb A30 row was left out: its
    # source may quote euros, and a price in an unknown currency is not a price.)
    assert usd_per_gpu_hour(find("GB200 NVL72 node (4 GPU)")) == pytest.approx(10.50)
    assert usd_per_gpu_hour(find("GB200 Superchip (per the post)")) == pytest.approx(4.54)
    assert usd_per_gpu_hour(find("denvr_Gaudi2x8")) == pytest.approx(1.10)
    priced = {price.gpu for price in PRICES}
    assert {"GB200 (per B200 GPU)", "Gaudi2-96GB"} <= priced
    assert find("denvr_Gaudi2x8").notes.startswith("marketplace:")


def test_rows_quoted_per_gpu_hour_are_multiplied_out_to_the_instance():
    # Vultr sells MI355X only as 8-GPU VMs at $2.590 per GPU-hour (on-demand): $20.72/h per VM;
    # Massed Compute's 8x A30 instance at $2.00/h is $0.25 per GPU-hour; its 2x H200 NVL at
    # $7.24/h is its 1x price ($3.62) twice; AWS trn2.48xlarge holds 16 Trainium2 chips.
    assert usd_per_gpu_hour(find("MI355X 8-GPU VM (2304 GB)")) == pytest.approx(2.59)
    assert usd_per_gpu_hour(find("8xA30 instance (per the benchmark)")) == pytest.approx(0.25)
    assert usd_per_gpu_hour(find("gpu_2x_h200_nvl")) == pytest.approx(usd_per_gpu_hour(find("gpu_1x_h200_nvl")))
    assert find("trn2.48xlarge").gpu_count == 16
    assert find("gx2-8x64x1v100").gpu == "V100-PCIe-16GB"  # IBM: "NVIDIA V100 PCIe 16 GB"
    priced = {price.gpu for price in PRICES}
    assert {"MI355X-288GB", "A30-24GB", "H200-NVL-141GB", "Trainium2-96GB", "V100-PCIe-16GB"} <= priced


def test_prices_as_of_gives_the_date_range():
    oldest, newest = prices_as_of(PRICES)
    assert oldest <= newest
    assert prices_as_of([]) is None


def test_load_prices_is_cached():
    assert load_prices() is PRICES


# --- uploads -----------------------------------------------------------------------------------


def test_the_whole_sheet_round_trips_as_an_upload():
    assert tuple(parse_price_csv(csv_text(raw_rows()))) == PRICES


def test_optional_columns_may_be_left_out():
    (price,) = parse_price_csv(csv_text([good_row()], REQUIRED_COLUMNS))
    assert price.spot_usd_per_hour is None and price.notes is None


def test_gpu_names_match_ignoring_case():
    (price,) = parse_price_csv(csv_text([good_row(gpu="h100-sxm5-80gb")]))
    assert price.gpu == "H100-SXM5-80GB"


def test_bytes_with_a_byte_order_mark_parse():
    assert len(parse_price_csv(b"\xef\xbb\xbf" + csv_text([good_row()]).encode())) == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"on_demand_usd_per_hour": "-1"}, "on_demand_usd_per_hour"),
        ({"on_demand_usd_per_hour": "cheap"}, "on_demand_usd_per_hour"),
        ({"on_demand_usd_per_hour": ""}, "on_demand_usd_per_hour"),
        ({"spot_usd_per_hour": "-0.5"}, "spot_usd_per_hour"),
        ({"spot_usd_per_hour": "inf"}, "spot_usd_per_hour"),
        ({"gpu_count": "0"}, "gpu_count"),
        ({"gpu_count": "2.5"}, "gpu_count"),
        ({"as_of": "last week"}, "as_of"),
        ({"provider": ""}, "provider"),
        ({"spot_usd_per_hour": "", "interruptions_per_hour": "0.5"}, "interruptions_per_hour"),
        ({"interruptions_per_hour": "-1"}, "interruptions_per_hour"),
    ],
)
def test_bad_cells_name_the_row_and_field(changes, field):
    with pytest.raises(PriceCatalogueError) as error:
        parse_price_csv(csv_text([good_row(), good_row(instance_type="bad", **changes)]), origin="sheet.csv")
    message = str(error.value)
    label = "bad" if field == "provider" else "AWS bad"
    assert message.startswith(f"sheet.csv row 2 ({label}): {field}: "), message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("changes", "field", "code"),
    [
        ({"instance_type": "box\x01"}, "instance_type", "U+0001"),
        ({"region": "us-east\x1b[31m"}, "region", "U+001B"),
        ({"notes": "two\tcolumns"}, "notes", "U+0009"),
        ({"source": "https://example.org/\x7f"}, "source", "U+007F"),
    ],
)
def test_control_characters_in_text_cells_are_refused(changes, field, code):
    # openpyxl refuses them in Excel cells, so the export would break later.
    with pytest.raises(PriceCatalogueError) as error:
        parse_price_csv(csv_text([good_row(**changes)]), origin="sheet.csv")
    message = str(error.value)
    assert message.startswith("sheet.csv row 1 (AWS "), message
    assert f"): {field}: control character {code} is not allowed (got " in message
    assert all(ord(char) >= 0x20 and char != "\x7f" for char in message), message


def test_a_control_character_in_the_label_prints_as_a_question_mark():
    with pytest.raises(PriceCatalogueError) as error:
        parse_price_csv(csv_text([good_row(instance_type="box\x01")]), origin="sheet.csv")
    expected = "sheet.csv row 1 (AWS box?): instance_type: control character U+0001 is not allowed (got 'box\\x01')"
    assert str(error.value) == expected


def test_parse_price_rows_refuses_control_characters_too():
    with pytest.raises(
        PriceCatalogueError, match=r"^cloud_prices.csv row 1 \(AWS p5.48xlarge\): notes: control character U\+0000"
    ):
        parse_price_rows([good_row(notes="nul\x00")])


def test_unknown_gpu_lists_close_catalogue_names():
    with pytest.raises(PriceCatalogueError, match=r"row 1 .*gpu: unknown GPU 'H100-SXM-80GB'; close catalogue names: "):
        parse_price_csv(csv_text([good_row(gpu="H100-SXM-80GB")]))
    with pytest.raises(PriceCatalogueError, match="H100-SXM5-80GB"):
        parse_price_csv(csv_text([good_row(gpu="H100-SXM-80GB")]))


def test_duplicate_instance_in_a_region_is_reported():
    with pytest.raises(PriceCatalogueError, match="row 2 .*duplicate of row 1"):
        parse_price_csv(csv_text([good_row(), good_row()]))


def test_missing_and_unknown_columns_are_reported():
    columns = [column for column in COLUMNS if column != "gpu"]
    with pytest.raises(PriceCatalogueError, match="header: missing column 'gpu'"):
        parse_price_csv(csv_text([good_row()], columns))
    with pytest.raises(PriceCatalogueError, match="header: unknown column 'colour'"):
        parse_price_csv(csv_text([good_row()], [*COLUMNS, "colour"]))
    with pytest.raises(PriceCatalogueError, match="column 'gpu' appears twice"):
        parse_price_csv("gpu," + csv_text([good_row()]))


def test_short_and_long_rows_are_reported():
    text = csv_text([good_row(notes="n")])
    assert text.endswith(",n\n")
    with pytest.raises(PriceCatalogueError, match=r"row 1 \(AWS p5.48xlarge\): 11 cells but the header has 12"):
        parse_price_csv(text.removesuffix(",n\n") + "\n")
    with pytest.raises(PriceCatalogueError, match="13 cells"):
        parse_price_csv(text.rstrip("\n") + ",extra\n")


@pytest.mark.parametrize("text", ["", "\n\n", " , ,\n", b""])
def test_empty_file_is_reported(text):
    with pytest.raises(PriceCatalogueError, match="empty"):
        parse_price_csv(text)


def test_header_without_rows_and_bad_encoding_are_reported():
    with pytest.raises(PriceCatalogueError, match="no price rows"):
        parse_price_csv(",".join(COLUMNS))
    with pytest.raises(PriceCatalogueError, match="not UTF-8"):
        parse_price_csv(b"\xff\xfe\x00provider")
    with pytest.raises(PriceCatalogueError, match="expected CSV text"):
        parse_price_csv(None)  # type: ignore[arg-type]


def test_parse_price_rows_treats_nan_as_blank_and_numbers_rows_from_1():
    (price,) = parse_price_rows([good_row(spot_usd_per_hour=float("nan"), interruptions_per_hour=None)])
    assert price.spot_usd_per_hour is None
    with pytest.raises(PriceCatalogueError, match=r"^cloud_prices.csv row 1: expected a mapping"):
        parse_price_rows(["not a row"])  # type: ignore[list-item]
    with pytest.raises(PriceCatalogueError, match="no price rows"):
        parse_price_rows([])


def test_random_garbage_only_ever_raises_price_catalogue_error():
    generator = random.Random(5)
    alphabet = 'ab,"\n\r\x00;é -1.5e9' + ",".join(COLUMNS)
    for _ in range(300):
        text = "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 200)))
        try:
            parse_price_csv(text)
        except PriceCatalogueError:
            pass
    for _ in range(100):
        data = bytes(generator.randrange(256) for _ in range(generator.randint(0, 100)))
        try:
            parse_price_csv(data)
        except PriceCatalogueError:
            pass


def test_random_cells_in_a_valid_row_only_ever_raise_price_catalogue_error():
    generator = random.Random(7)
    values = ["", "-1", "0", "1e400", "nan", "x", "2026-02-30", "H100", "  ", "1.5", "\x00"]
    for _ in range(200):
        row = good_row(**{generator.choice(COLUMNS): generator.choice(values)})
        try:
            parse_price_csv(csv_text([row]))
        except PriceCatalogueError:
            pass


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(PriceCatalogueError, match="not found"):
        load_prices(missing)
    sheet = tmp_path / "mine.csv"
    sheet.write_text(csv_text([good_row()]), encoding="utf-8")
    assert len(load_prices(sheet)) == 1


# --- host RAM per instance (host_ram_gib) ------------------------------------------------


def test_host_ram_is_the_published_memory_of_the_instance():
    """AWS lists p4d.24xlarge at 1152 GiB and p5.48xlarge at 2048 GiB; GCP a2-highgpu-8g at 680 GB
    (Compute Engine GB are GiB); Lambda's 8x H100 SXM5 at 1800 GiB (SkyPilot catalogue MemoryGiB)."""
    assert find("p4d.24xlarge").host_ram_gib == 1152
    assert find("p5.48xlarge").host_ram_gib == 2048
    assert find("a2-highgpu-8g").host_ram_gib == 680
    assert find("gpu_8x_h100_sxm5").host_ram_gib == 1800


def test_every_host_ram_figure_names_its_document_in_the_notes():
    filled = [price for price in PRICES if price.host_ram_gib is not None]
    assert len(filled) >= 100
    for price in filled:
        assert price.notes is not None and "host_ram_gib:" in price.notes, price.instance_type
        note = price.notes.split("host_ram_gib:", 1)[1]
        assert f"{price.host_ram_gib:g} GiB" in note and ("github.com/" in note or "https://" in note)


def test_host_ram_may_be_left_out_or_empty_and_must_be_positive():
    columns = [column for column in COLUMNS if column != "host_ram_gib"]
    (price,) = parse_price_csv(csv_text([good_row()], columns))
    assert price.host_ram_gib is None
    (price,) = parse_price_csv(csv_text([good_row(host_ram_gib="")]))
    assert price.host_ram_gib is None
    with pytest.raises(PriceCatalogueError, match="host_ram_gib"):
        parse_price_csv(csv_text([good_row(host_ram_gib="0")]))
    with pytest.raises(PriceCatalogueError, match="host_ram_gib"):
        parse_price_csv(csv_text([good_row(host_ram_gib="lots")]))


def test_every_gpu_has_a_rental_row_or_a_purchase_price_but_two_unpriced_chips():
    """A cost needs a rental row (cloud_prices.csv) or a purchase price (gpus.csv, amortised with
    power). Google's TPU7x and AWS's Trainium3 are rented only and had no published price as of
    2026-11-23, so they alone have neither. The V100 PCIe 32GB and MI250X, which no provider in the
    sheet rents, cost as owned hardware: USD 11,458 and 14,500 (Epoch AI's ML hardware dataset,
    from Microway's V100 price analysis and The Next Platform, 2021-12-06)."""
    rented = {price.gpu for price in PRICES}
    catalogue = load_gpu_catalogue()
    unpriced = sorted(gpu.name for gpu in catalogue if gpu.name not in rented and gpu.price_usd is None)
    assert unpriced == ["TPU7x", "Trainium3-144GB"]
    purchase = {gpu.name: gpu.price_usd for gpu in catalogue}
    assert purchase["V100-PCIe-32GB"] == 11_458 and purchase["MI250X-128GB"] == 14_500


def test_each_chip_nothing_prices_says_why():
    """data/unpriced_gpus.csv names exactly the chips with neither a rental row nor a purchase
    price, and the planner says why each gets no cost: with owned hardware left out, the V100 PCIe
    32GB (purchase price only) is named with that price; with owned included only TPU7x remains."""
    assert sorted(unpriced_reasons()) == ["TPU7x", "Trainium3-144GB"]
    gpus = [find_gpu(name) for name in ("H100-SXM5-80GB", "V100-PCIe-32GB", "TPU7x")]
    rented_only = unpriced_gpus(gpus, PRICES, include_owned=False)
    assert rented_only == [
        "V100-PCIe-32GB: no provider in the price sheet rents it; owned, it costs its purchase price "
        "(USD 11,458) amortised plus power (owned hardware on the Plan page, buy or rent on the Time and cost page)",
        "TPU7x: access is arranged through a Google Cloud account team and it runs on GKE only; no public price "
        "was found (https://docs.cloud.google.com/tpu/docs/tpu7x, 2026-11-23); add your own price in a price sheet "
        "to cost it",
    ]
    assert unpriced_gpus(gpus, PRICES, include_owned=True) == rented_only[1:]
