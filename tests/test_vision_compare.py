"""CPU vs GPU vs mixed precision (calculators.cost.vision_comparison) and its section on the Time
and cost page."""

import pytest

from calculators.cost.options import OwnershipSettings, owned_usd_per_gpu_hour
from calculators.cost.prices import load_prices
from calculators.cost.vision_comparison import cheapest_usd_per_gpu_hour, cpu_gpu_precision_table
from calculators.hardware.catalogue import find_gpu
from calculators.hardware.cpus import find_cpu
from calculators.models.vision_library import vision_model
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES
from tests.apptest_helpers import open_app


@pytest.fixture(scope="module")
def rows():
    cpu, gpu = find_cpu("Xeon-Platinum-8480+"), find_gpu("A100-SXM4-80GB")
    return cpu_gpu_precision_table(vision_model("resnet50"), cpu, gpu, 256, load_prices())


def test_four_rows_cpu_then_gpu_fp32_then_mixed(rows):
    assert [(row.kind, row.precision) for row in rows] == [
        ("CPU", "fp32"), ("CPU", "amp-bf16"), ("GPU", "fp32"), ("GPU", "amp-bf16")
    ]  # fmt: skip
    assert rows[3].samples_per_s > rows[2].samples_per_s  # mixed precision beats fp32 on the GPU


def test_hours_and_cost_per_epoch(rows):
    for row in rows:
        assert row.hours_per_epoch == pytest.approx(IMAGENET_1K_TRAIN_IMAGES / row.samples_per_s / 3600)
    cpu = rows[0]
    # owned: USD 10,710 over 3 years of 8,760 h, plus the facility power (calculators.cost.options)
    assert cpu.owned_usd_per_hour == pytest.approx(owned_usd_per_gpu_hour(find_cpu("Xeon-Platinum-8480+"),
                                                                          OwnershipSettings()))  # fmt: skip
    assert cpu.owned_usd_per_epoch == pytest.approx(cpu.owned_usd_per_hour * cpu.hours_per_epoch)
    assert cpu.cloud_usd_per_epoch is None  # no price-sheet row rents a bare CPU
    gpu = rows[3]
    assert gpu.cloud_usd_per_hour == pytest.approx(cheapest_usd_per_gpu_hour(find_gpu("A100-SXM4-80GB"), load_prices()))
    assert gpu.cloud_usd_per_epoch == pytest.approx(gpu.cloud_usd_per_hour * gpu.hours_per_epoch)


def test_cheapest_gpu_hour_divides_an_instance_by_its_gpus():
    prices = [p for p in load_prices() if p.gpu == "A100-SXM4-80GB"]
    assert cheapest_usd_per_gpu_hour(find_gpu("A100-SXM4-80GB"), prices) == pytest.approx(
        min(p.on_demand_usd_per_hour / p.gpu_count for p in prices)
    )


def comparison_table(app):
    return [frame.value for frame in app.dataframe if "hours per epoch (h)" in frame.value.columns][0]


def test_time_and_cost_compares_the_sidebars_image_model():
    # the review found resnet50 compared while the sidebar held another model
    app = open_app("app_pages/cost.py", timeout_s=120, model="vit_base_patch16_224", img_mb="64")
    assert not app.exception and not app.error
    table = comparison_table(app)
    assert list(table["kind"]) == ["CPU", "CPU", "GPU", "GPU"]
    assert "vision_cmp_model" not in {box.key for box in app.selectbox}
    caption = next(text for text in (c.value for c in app.caption) if "ImageNet-1k" in text and "sidebar" in text)
    assert "vit_base_patch16_224" in caption and "64 images" in caption and "resnet50" not in caption
    # one naming: the chart's categories are the table's device and precision words
    figure = app.get("plotly_chart")[-1].proto.spec
    assert "TF32" not in " ".join(table["precision"]) and "amp-" not in figure
    for device, precision in zip(table["device"], table["precision"], strict=True):
        assert f"{device} {precision}" in figure
    assert '"tickprefix":"$"' in figure.replace(" ", "") or '"ticktext":["$' in figure.replace(" ", "")
    app.selectbox(key="vision_cmp_gpu").set_value("V100-SXM2-16GB").run()
    assert list(comparison_table(app)["precision"])[-1] == "mixed fp16"  # a V100 has no bf16
    assert not any("None" in str(value) for value in comparison_table(app).to_numpy().ravel())


def test_a_transformer_gets_no_comparison_of_another_model():
    app = open_app("app_pages/cost.py", timeout_s=120)
    assert not app.exception
    assert not [frame for frame in app.dataframe if "hours per epoch (h)" in frame.value.columns]
    assert "CPU vs GPU vs mixed precision, per epoch" in [header.value for header in app.subheader]
    assert any("no CPU device" in caption.value for caption in app.caption)
