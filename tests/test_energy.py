"""Energy and carbon of a run (calculators.cost.energy, calculators.cost.grid), worked by hand.

The defaults (calculators.cost.energy's docstring has the sources):
    share of TDP while training 0.76  (Newkirk et al. 2025: 8 x H100 nodes at 76% of rated power)
    host W per GPU (10,200 - 8 x 700) / 8 x 0.76 = 575 x 0.76 = 437 W  (DGX H100 rated 10.2 kW)
    PUE 1.56  (Uptime Institute 2024 survey average)
so one H100 (TDP 700 W) costs the facility (700 x 0.76 + 437) x 1.56 = (532 + 437) x 1.56 = 1,511.64 W.
"""

from __future__ import annotations

import csv
import datetime as dt
import json

import pytest

from calculators.cost.energy import (
    DEFAULT_HOST_W_PER_GPU,
    EnergySettings,
    co2_kg,
    energy_kwh,
    facility_w_per_gpu,
)
from calculators.cost.grid import DEFAULT_GRID_PATH, GridIntensityError, grid_for, load_grid_intensity, parse_grid_csv
from calculators.cost.options import OwnershipSettings, buy_vs_rent, cost_options, owned_usd_per_gpu_hour
from calculators.cost.prices import DEFAULT_PRICES_PATH, CloudPrice
from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.models.presets import get_preset
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings
from tests.cli_helpers import run_cli
from ui.cost_table import CO2_COLUMN, ENERGY_COLUMN, ranked_rows

H100 = find_gpu("H100-SXM5-80GB")
H100_FACILITY_W = 1511.64  # (700 x 0.76 + 437) x 1.56, above
# Llama-2-7B, bf16-mixed, micro-batch 1 x 4096 on one H100 at utilisation 0.5: 25.8875 h for 1e9
# tokens (tests/test_cost.py works it out from the FLOPs per token and the dense peak).
ONE_GPU_HOURS = 25.8875


def price(provider: str, region: str) -> CloudPrice:
    return CloudPrice(
        provider=provider,
        instance_type="h100x1",
        gpu="H100-SXM5-80GB",
        gpu_count=1,
        region=region,
        on_demand_usd_per_hour=3.0,
        source="test",
        as_of=dt.date(2026, 1, 1),
    )


def one_h100_options(*prices: CloudPrice, energy: EnergySettings | None = None):
    training = TrainingSettings(micro_batch=1, seq_len=4096, precision="bf16-mixed")
    time = TimeSettings(dataset_tokens=1e9, utilisation=0.5)
    return cost_options(get_preset("llama-2-7b"), training, time, list(prices), load_gpu_catalogue(), energy=energy)


# --- the power figure -------------------------------------------------------------------


def test_host_watts_per_gpu_come_from_the_dgx_h100_rating_at_the_measured_share():
    # (10,200 W - 8 x 700 W) / 8 = 575 W of server per GPU at its rating; x 0.76 = 437 W.
    assert DEFAULT_HOST_W_PER_GPU == pytest.approx(437.0)


def test_one_h100_costs_the_facility_1512_watts():
    assert H100.tdp_w == 700
    assert facility_w_per_gpu(H100, EnergySettings()) == pytest.approx(H100_FACILITY_W)


def test_eight_h100_for_ten_hours_by_hand():
    # 1,511.64 W x 8 GPUs x 10 h / 1000 = 120.9312 kWh.
    watts = facility_w_per_gpu(H100, EnergySettings())
    assert energy_kwh(watts, 8, 10.0) == pytest.approx(120.9312)
    # On AWS us-east-1's grid (323.05 gCO2e/kWh, the table's row): 120.9312 x 323.05 / 1000 = 39.0668 kg.
    assert co2_kg(120.9312, 323.05) == pytest.approx(39.06682, rel=1e-6)


def test_the_users_own_settings_replace_the_defaults():
    # At TDP with a 200 W host in a PUE 1.1 hall: (700 + 200) x 1.1 = 990 W.
    settings = EnergySettings(gpu_share_of_tdp=1.0, host_w_per_gpu=200, pue=1.1)
    assert facility_w_per_gpu(H100, settings) == pytest.approx(990.0)


def test_a_gpu_without_tdp_has_no_power_figure():
    assert facility_w_per_gpu(H100.model_copy(update={"tdp_w": None}), EnergySettings()) is None


# --- cost options carry it --------------------------------------------------------------


def test_a_cost_option_carries_its_energy_and_its_regions_co2():
    (option,) = one_h100_options(price("AWS", "us-east-1"))
    assert option.hours == pytest.approx(ONE_GPU_HOURS, rel=1e-4)
    # 1.51164 kW x 1 GPU x 25.8875 h = 39.1326 kWh; x 323.05 g/kWh / 1000 = 12.6418 kg CO2e.
    assert option.energy_kwh == pytest.approx(39.1326, rel=1e-4)
    assert option.grid_gco2e_per_kwh == 323.05
    assert option.co2_kg == pytest.approx(12.6418, rel=1e-4)
    assert option.co2_unknown_reason is None


def test_a_given_grid_intensity_replaces_the_regions():
    # 39.1326 kWh x 400 g/kWh / 1000 = 15.6530 kg, on a region the table does not know as well.
    options = one_h100_options(price("Lambda", "all 17 catalog regions (same price)"), energy=EnergySettings(
        grid_gco2e_per_kwh=400))  # fmt: skip
    assert options[0].co2_kg == pytest.approx(15.6530, rel=1e-4)


def test_a_region_that_is_not_one_place_has_no_co2_and_says_why():
    (option,) = one_h100_options(price("Lambda", "all 17 catalog regions (same price)"))
    assert option.energy_kwh == pytest.approx(39.1326, rel=1e-4)  # the energy is still known
    assert option.co2_kg is None and option.grid_gco2e_per_kwh is None
    assert option.co2_unknown_reason == "grid intensity not known: the price row covers regions on different grids."


def test_a_region_missing_from_the_table_has_no_co2_and_says_why():
    (option,) = one_h100_options(price("MyCloud", "basement"))
    assert option.co2_kg is None
    assert option.co2_unknown_reason == ("grid intensity not known: MyCloud basement is not in data/grid_intensity.csv")


def test_the_table_says_not_known_in_words_never_zero():
    known, unknown = one_h100_options(price("AWS", "us-east-1"), price("Lambda", "all 17 catalog regions (same price)"))
    rows = ranked_rows([known, unknown])
    by_provider = dict(zip(rows["provider"], rows[CO2_COLUMN], strict=True))
    assert by_provider == {"AWS": "13", "Lambda": "not known"}  # 12.64 kg shown whole
    assert list(rows[ENERGY_COLUMN]) == ["39", "39"]


# --- owned hardware uses the same power figure -------------------------------------------


def test_owned_electricity_uses_the_same_power_figure():
    # Amortised $30,000 / (3 x 8760 h) = $1.141553/h; power 1.51164 kW (PUE 1.56 here too) x $0.13 = $0.196513/h.
    ownership = OwnershipSettings(purchase_usd_per_gpu=30_000)
    assert owned_usd_per_gpu_hour(H100, ownership) == pytest.approx(1.141553 + 0.196513, rel=1e-6)
    result = buy_vs_rent(H100, 8, rent_usd_per_hour=23.6, run_hours=10.0, ownership=ownership)
    # 8 x 1.51164 kW = 12.09312 kW, the rented options' figure per GPU
    assert result.power_kw == pytest.approx(8 * facility_w_per_gpu(H100, EnergySettings()) / 1000)
    assert result.power_kw == pytest.approx(12.09312)


def test_owned_power_follows_the_energy_settings_at_your_own_pue():
    # (700 x 1.0 + 100 W host) x your PUE 1.2 = 960 W x $0.10/kWh = $0.096/h over amortised $8760/26,280 h = $0.333333.
    ownership = OwnershipSettings(purchase_usd_per_gpu=8760, pue=1.2, electricity_usd_per_kwh=0.10)
    energy = EnergySettings(gpu_share_of_tdp=1.0, host_w_per_gpu=100, pue=1.5)  # the cloud's PUE is not yours
    assert owned_usd_per_gpu_hour(H100, ownership, energy=energy) == pytest.approx(0.333333 + 0.096, rel=1e-5)


# --- the grid table ---------------------------------------------------------------------


def test_every_priced_region_has_a_row_in_the_grid_table():
    with DEFAULT_PRICES_PATH.open(encoding="utf-8") as handle:
        regions = {(row["provider"], row["region"]) for row in csv.DictReader(handle)}
    missing = [region for region in sorted(regions) if grid_for(*region) is None]
    assert missing == []


def test_grid_rows_by_hand():
    assert grid_for("GCP", "us-central1").gco2e_per_kwh == 412.72  # Google's 2024 figure for Iowa
    assert grid_for("Nebius", "us-central1").gco2e_per_kwh == 369.473  # another us-central1: the US average
    assert grid_for("aws", "US-EAST-1").gco2e_per_kwh == 323.05  # case does not matter
    assert grid_for("Vast.ai", "Sichuan CN AS").gco2e_per_kwh is None
    assert len(load_grid_intensity()) == len(list(csv.DictReader(DEFAULT_GRID_PATH.open(encoding="utf-8"))))


HEADER = "provider,region,location,gco2e_per_kwh,source,as_of,notes\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "P,r,Here,,https://example.org,2026-01-01,\n",
            "grid.csv row 1 (P r): row: notes: say why the intensity is not known when gco2e_per_kwh is empty",
        ),
        ("P,r,Here,-1,https://example.org,2026-01-01,\n", "grid.csv row 1 (P r): gco2e_per_kwh: Input should be"),
        ("P,r,Here,100,a blog,2026-01-01,\n", "grid.csv row 1 (P r): source: 'a blog' is not an https:// URL"),
        (
            "P,r,Here,100,https://example.org,2026-01-01,\nP,R,There,90,https://example.org,2026-01-01,\n",
            "grid.csv row 2 (P R): region: appears twice for P",
        ),
    ],
)
def test_a_bad_grid_table_is_refused_in_one_line(body, message):
    with pytest.raises(GridIntensityError) as error:
        parse_grid_csv(HEADER + body, "grid.csv")
    assert str(error.value).startswith(message)


# --- the command line ---------------------------------------------------------------------


def test_cost_json_carries_energy_and_co2(capsys):
    argv = ("cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--json")
    code, out, _ = run_cli(capsys, *argv)
    options = json.loads(out)
    assert code == 0 and all("energy_kwh" in option and "co2_kg" in option for option in options)
    aws = next(o for o in options if o["provider"] == "AWS" and o["region"] == "us-east-1" and o["energy_kwh"])
    # the table's 323.05 g/kWh x the option's own energy
    assert aws["co2_kg"] == pytest.approx(aws["energy_kwh"] * 323.05 / 1000)
    # --pue 1.1 --host-w-per-gpu 0 --gpu-share-of-tdp 1: an H100 draws 700 x 1.1 = 770 W, so the
    # energy is 0.770 kW x GPUs x hours; --grid-gco2-per-kwh 500 gives 0.5 kg per kWh everywhere.
    flags = ("--pue", "1.1", "--host-w-per-gpu", "0", "--gpu-share-of-tdp", "1", "--grid-gco2-per-kwh", "500")
    code, out, _ = run_cli(capsys, *argv, *flags)
    h100 = next(o for o in json.loads(out) if o["gpu"] == "H100-SXM5-80GB")
    assert h100["energy_kwh"] == pytest.approx(0.770 * h100["gpus"] * h100["hours"])
    assert h100["co2_kg"] == pytest.approx(h100["energy_kwh"] * 0.5)


def test_cost_refuses_a_pue_below_one_in_one_line(capsys):
    code, _, err = run_cli(capsys, "cost", "--model", "gpt2", "--dataset-tokens", "1e9", "--pue", "0.5")
    assert code == 2 and err.startswith("error: --pue: must be at least 1") and err.count("\n") == 1


# --- the Time and cost page -------------------------------------------------------------------


def test_the_cost_page_shows_energy_and_co2_columns_and_follows_a_linked_grid_intensity():
    from tests.apptest_helpers import open_app

    app = open_app("app_pages/cost.py", model="gpt2", tokens_b="2", grid_g="1000", pue="1")
    assert not app.exception
    table = app.dataframe[0].value
    assert {ENERGY_COLUMN, CO2_COLUMN} <= set(table.columns)
    # at 1,000 g/kWh every known energy is its own CO2 in kg (kWh x 1000 / 1000)
    known = table[table[ENERGY_COLUMN] != "not known"]
    assert len(known) and list(known[ENERGY_COLUMN]) == list(known[CO2_COLUMN])
