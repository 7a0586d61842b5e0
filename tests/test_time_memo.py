"""The caches that make the time model and the priced options fast (calculators.timing.memo, the spot
spread's index) must never hand back a stale answer: keys tell apart every field, a model changed in
place is estimated afresh, and a savings table given as a list is read each time."""

from __future__ import annotations

import datetime as dt

import pytest

from calculators.cost.prices import CloudPrice
from calculators.cost.spot_spread import SpotSaving, savings_of, spot_price_range
from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.estimate import estimate_time
from calculators.timing.memo import cached_on_key, workload_key, workload_of
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings


def test_a_cached_fact_is_worked_out_once_per_key():
    calls = []

    @cached_on_key(maxsize=4)
    def doubled(items: list[int]) -> int:
        calls.append(items)
        return 2 * sum(items)

    # the arguments need not be hashable: the key stands for them
    assert doubled(("a",), [1, 2]) == 6
    assert doubled(("a",), [1, 2]) == 6
    assert doubled(("b",), [5]) == 10
    assert calls == [[1, 2], [5]]


def test_the_workload_key_tells_apart_any_field_and_the_class():
    spec, settings = get_preset("gpt2"), TrainingSettings()
    key = workload_key(spec, settings)
    assert workload_key(spec.model_copy(), settings.model_copy()) == key
    assert workload_key(spec, settings.model_copy(update={"micro_batch": 2})) != key
    assert workload_key(spec.model_copy(update={"dropout": 0.0}), settings) != key  # gpt2's is 0.1
    assert workload_key(spec.model_copy(update={"name": "gpt2 "}), settings) != key
    # the same fields in another class (a settings object where the model was) make another key
    assert workload_key(settings, spec) != key
    assert workload_of(spec, settings).key == key


def test_an_estimate_follows_a_model_and_settings_changed_in_place():
    gpu, time_settings = find_gpu("H100-SXM5-80GB"), TimeSettings(dataset_tokens=1e9)
    spec, settings = get_preset("gpt2"), TrainingSettings(micro_batch=4)
    before = estimate_time(spec, settings, gpu, time_settings)
    spec.n_layers, settings.micro_batch = 24, 8  # changed in place, not copied
    after = estimate_time(spec, settings, gpu, time_settings)
    fresh = estimate_time(
        get_preset("gpt2").model_copy(update={"n_layers": 24}), TrainingSettings(micro_batch=8), gpu, time_settings
    )
    assert after == fresh
    # twice the layers and twice the tokens per step: the step takes longer
    assert after.tokens_per_step == 2 * before.tokens_per_step
    assert after.step_s > before.step_s


def _saving(region: str, pct: float) -> SpotSaving:
    return SpotSaving(
        provider="AWS",
        region=region,
        instance_type="p9.test",
        savings_vs_ondemand_pct=pct,
        source="https://example.org/spot-advisor",
        as_of=dt.date(2026, 1, 1),
    )


ROW = CloudPrice(
    provider="AWS",
    instance_type="p9.test",
    gpu="H100-SXM5-80GB",
    gpu_count=8,
    region="us-east-1",
    on_demand_usd_per_hour=10.0,
    spot_usd_per_hour=4.0,
    source="https://example.org/prices",
    as_of=dt.date(2026, 1, 1),
)


@pytest.mark.parametrize("table_type", [tuple, list])
def test_a_savings_table_gives_its_range_however_often_it_is_asked(table_type):
    table = table_type([_saving("a", 70), _saving("b", 50), _saving("c", -5)])
    for _ in range(2):  # the second time from the index
        prices = spot_price_range(ROW, table)
        # regions: 10 x (1 - 0.70) = 3.0 and 10 x (1 - 0.50) = 5.0, with the sheet's 4.0 between;
        # region c (spot dearer than on demand) is left out
        assert (prices.low_usd_per_hour, prices.high_usd_per_hour) == pytest.approx((3.0, 5.0))
        assert "savings of 50-70% over on demand in 2 regions" in prices.note
        assert "1 region(s) where spot costs at least on demand left out" in prices.note
        assert [row.region for row in savings_of(ROW, table)] == ["a", "b", "c"]


def test_a_savings_list_changed_in_place_is_read_again():
    table = [_saving("a", 70), _saving("b", 50)]
    assert spot_price_range(ROW, table).low_usd_per_hour == pytest.approx(3.0)
    table[0] = _saving("a", 80)  # a list can change: never indexed for later calls
    assert spot_price_range(ROW, table).low_usd_per_hour == pytest.approx(2.0)  # 10 x (1 - 0.80)


def test_an_infinite_float_and_none_make_different_keys():
    # model_dump_json writes both as null: the key names the infinite float apart
    spec, settings = get_preset("gemma-2-2b"), TrainingSettings()
    uncapped = spec.model_copy(update={"attention_softcap": None})
    infinite = spec.model_copy(update={"attention_softcap": float("inf")})
    assert uncapped.model_dump_json() == infinite.model_dump_json()
    assert workload_key(uncapped, settings) != workload_key(infinite, settings)
