"""Serving is priced on whole instances (cost.serving.rent_instances, plan.serving.cheapest_rental): one
rents an instance, never a share of one, and a model that fits in no single instance is named as needing
pipeline parallel, which is not modelled. Figures worked by hand in each docstring."""

from __future__ import annotations

import datetime as dt

import pytest

from calculators.cost.prices import CloudPrice
from calculators.cost.serving import rent_instances, serving_cost_options
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.interface.cli import main
from calculators.models.library import resolve_model
from calculators.plan.serving import ServingPlanRequest, cheapest_rental, plan_serving
from calculators.timing.serving import ServingRequest
from calculators.workload.serving import ServingSettings


def _price(instance: str, gpus: int, usd_per_hour: float, gpu: str = "A30-24GB") -> CloudPrice:
    return CloudPrice(
        provider="p", instance_type=instance, gpu=gpu, gpu_count=gpus, region="r", on_demand_usd_per_hour=usd_per_hour,
        source="https://example.com/prices", as_of=dt.date(2026, 1, 1),
    )  # fmt: skip


def test_one_replica_rents_the_whole_instance():
    """One 1-GPU replica on an 8-GPU instance at $8/h costs $8/h, not the $1/h of one GPU's share; the
    instance holds 8 replicas, so each replica's share of the bill is $1/h."""
    rented = rent_instances(8.0, gpus_per_instance=8, tensor_parallel=1, replicas=1)
    assert (rented.instances, rented.usd_per_hour, rented.gpus) == (1, 8.0, 8)
    assert (rented.replicas_held, rented.usd_per_replica_hour) == (8, 1.0)


def test_replicas_pack_into_whole_instances():
    """5 replicas of 2 GPUs on 8-GPU instances at $20/h: 8 // 2 = 4 a instance, ceil(5 / 4) = 2 instances,
    $40/h, 16 GPUs, 8 replicas held (3 spare), $5/h a replica."""
    rented = rent_instances(20.0, gpus_per_instance=8, tensor_parallel=2, replicas=5)
    assert (rented.instances, rented.usd_per_hour, rented.gpus, rented.replicas_held) == (2, 40.0, 16, 8)
    assert rented.usd_per_replica_hour == 5.0


def test_a_provider_selling_single_gpus_bills_one_gpu_each():
    """3 replicas of 1 GPU on 1-GPU instances at $1.20/h: 3 instances, $3.60/h."""
    rented = rent_instances(1.2, gpus_per_instance=1, tensor_parallel=1, replicas=3)
    assert (rented.instances, rented.replicas_held) == (3, 3)
    assert rented.usd_per_hour == pytest.approx(3.6)


def test_a_group_larger_than_the_instance_is_not_rented_there():
    assert rent_instances(10.0, gpus_per_instance=4, tensor_parallel=8) is None


def test_the_plan_rents_the_offer_that_bills_least_for_the_replicas():
    """An 8-GPU instance at $8/h against a 1-GPU one at $1.50/h, replicas of 1 GPU: 1 replica costs $1.50
    on the small one (not the $1 share of the big one); 5 cost 5 x 1.50 = $7.50 < $8; 6 cost $9 > $8, so
    one 8-GPU instance, with 2 spare replicas."""
    offers = {8: (_price("a30.8", 8, 8.0), "on demand", 8.0), 1: (_price("a30.1", 1, 1.5), "on demand", 1.5)}
    for replicas, instance, usd_per_hour in ((1, "a30.1", 1.5), (5, "a30.1", 7.5), (6, "a30.8", 8.0)):
        offer, rented = cheapest_rental(offers, tensor_parallel=1, replicas=replicas)
        assert offer[0].instance_type == instance
        assert rented.usd_per_hour == pytest.approx(usd_per_hour)
    _, rented = cheapest_rental(offers, tensor_parallel=2, replicas=1)  # a group of 2 needs the 8-GPU instance
    assert (rented.gpus_per_instance, rented.replicas_held) == (8, 4)


def test_cost_options_bill_whole_instances_and_count_every_replica_they_hold():
    """Llama-2-7B, one replica per A30 at concurrency 8: the 8-GPU instance bills $8/h and holds 8 replicas
    ($1/h each), the 1-GPU one $1.50/h for one, so its tokens cost 1.5 / 1 = 1.5 times as much."""
    spec = resolve_model("llama-2-7b")
    request = ServingRequest(input_len=512, output_len=256, concurrency=8)
    prices = [_price("a30.8", 8, 8.0), _price("a30.1", 1, 1.5)]
    options = {o.instance_type: o for o in serving_cost_options(spec, ServingSettings(), request, prices,
                                                                load_gpu_catalogue())}  # fmt: skip
    big, small = options["a30.8"], options["a30.1"]
    assert (big.usd_per_hour, big.instances, big.replicas_per_instance) == (8.0, 1, 8)
    assert (small.usd_per_hour, small.instances, small.replicas_per_instance) == (1.5, 1, 1)
    assert small.usd_per_million_output_tokens == pytest.approx(1.5 * big.usd_per_million_output_tokens)
    two = serving_cost_options(spec, ServingSettings(tensor_parallel=2), request, prices, load_gpu_catalogue())
    small_two = next(o for o in two if o.instance_type == "a30.1")
    assert small_two.excluded_reason == "tensor parallel 2 needs 2 GPUs in one instance; a30.1 has 1"
    assert small_two.usd_per_hour is None


def test_llama_405b_bf16_on_eight_l40s_needs_more_than_one_node(capsys):
    """405B parameters x 2 bytes = 810 GB of bf16 weights against 8 x 48 GB = 384 GB on one node."""
    argv = ["time", "--model", "llama-3.1-405b", "--mode", "inference", "--gpu", "L40S-48GB", "--tensor-parallel"]
    assert main([*argv, "8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "llama-3.1-405b needs more than one node (8 GPUs): pipeline parallel serving is not modelled" in err
    assert main([*argv, "4"]) == 2  # inside a node, more GPUs are still the answer
    assert "use more tensor-parallel GPUs (up to 8, one node)" in capsys.readouterr().err


def test_the_plan_names_weights_no_single_instance_holds():
    """On L40S instances of 4 and 8 GPUs, bf16 Llama-3.1-405B (810 GB) fits in none: the plan says so rather
    than dropping it, and with bf16 alone that is the problem; 4-bit weights (about 200 GiB) fit on 8."""
    spec = resolve_model("llama-3.1-405b")
    prices = [_price("g6e.12xlarge", 4, 10.49, "L40S-48GB"), _price("g6e.48xlarge", 8, 30.13, "L40S-48GB")]
    request = ServingPlanRequest(requests_per_s=0.1, input_len=1024, output_len=1024)
    result = plan_serving(spec, ServingSettings(), request, load_gpu_catalogue(), prices)
    bf16 = next(words for words in result.left_out if words.startswith("bf16 weights"))
    assert "fit in no single priced instance of L40S-48GB" in bf16
    assert "pipeline parallel serving is not modelled" in bf16
    assert result.cheapest is not None and result.cheapest.weight_precision in ("int4", "fp4")
    assert result.cheapest.gpus_per_instance == 8 and result.cheapest.usd_per_hour == pytest.approx(30.13)
    only_bf16 = request.model_copy(update={"precisions": ("bf16",)})
    result = plan_serving(spec, ServingSettings(), only_bf16, load_gpu_catalogue(), prices)
    assert result.cheapest is None and result.problems == [bf16]
