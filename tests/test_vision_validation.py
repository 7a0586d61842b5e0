"""The image-model throughput validation (calculators.validation.vision_throughput) and its place on
the Validation page."""

import statistics

import pytest

from calculators.timing.data_loading import images_per_s_per_core
from calculators.validation import vision_throughput as vt
from calculators.validation.vision_throughput import summary_by_model, vision_throughput_table
from tests.apptest_helpers import open_app


@pytest.fixture(scope="module")
def table():
    return {row.id: row for row in vision_throughput_table()}


def test_all_gpu_rows_are_per_gpu(table):
    # V005: DLE ResNet-50, 8 x A100 TF32, "| 8 | 7248 img/s |": 906 per GPU
    assert table["V005"].measured_images_per_s_per_gpu == pytest.approx(7248 / 8)
    assert table["V005"].gpus == 8 and table["V005"].library_key == "resnet50"


def test_the_estimate_is_the_gpu_capped_by_the_rows_loader(table):
    # DLE on a DGX A100: 10 DataLoader workers per GPU, one core each
    row = table["V074"]  # EfficientNet-B0, 1 x A100, AMP
    assert row.loader_cores_per_gpu == 10
    assert row.estimate_images_per_s_per_gpu == pytest.approx(
        min(row.gpu_estimate_images_per_s_per_gpu, 10 * images_per_s_per_core())
    )
    assert row.ratio == pytest.approx(row.estimate_images_per_s_per_gpu / 2489)
    assert table["V185"].loader_cores_per_gpu is None  # timm's benchmark: synthetic inputs


def test_the_loader_has_the_nodes_cores_shared_by_its_gpus(table):
    # DGX-1: 40 physical cores for 8 GPUs, so 8 workers per GPU decode on 5 cores; alone, on 8
    assert table["V092"].loader_cores_per_gpu == 5  # EfficientNet-B0, 8 x V100, AMP
    assert table["V090"].loader_cores_per_gpu == 8  # the same on one V100
    assert table["V092"].estimate_images_per_s_per_gpu == pytest.approx(
        min(table["V092"].gpu_estimate_images_per_s_per_gpu, 5 * images_per_s_per_core())
    )
    assert table["V007"].loader_cores_per_gpu == 10  # DGX A100: 128 cores, 16 per GPU, 10 workers


def test_resnext_and_se_resnext_rows_count(table):
    # DLE's ResNeXt-101 32x4d and SE-ResNeXt-101 32x4d are timm's, traced into the library
    assert table["V033"].counted and table["V033"].library_key == "resnext101_32x4d"
    assert table["V049"].counted and table["V049"].library_key == "seresnext101_32x4d"
    # V049: "| 1 | 395 img/s |" on one A100, TF32, batch 128 (configs.yml)
    assert table["V049"].measured_images_per_s_per_gpu == pytest.approx(395)


def test_rows_that_cannot_count_say_why(table):
    assert "3D U-Nets" in " ".join(row.why_not for row in table.values() if row.why_not)
    ambiguous = [row for row in table.values() if row.why_not and "ambiguous" in row.why_not]
    assert {row.id for row in ambiguous if "V100 32GB" in row.why_not} == {f"V{n:03}" for n in range(97, 105)}
    assert not any(row.counted for row in ambiguous if "V100 32GB" in row.why_not)
    unitless = {row.id for row in ambiguous if "states no unit" in row.why_not}
    assert unitless == {f"V{n}" for n in range(105, 111)}
    assert not any(row.counted for row in ambiguous)
    assert all(row.why_not for row in table.values() if not row.counted)


def test_summary_groups_by_model(table):
    summaries = {item.model: item for item in summary_by_model(list(table.values()))}
    resnet = [row.ratio for row in table.values() if row.counted and row.model == "ResNet-50 v1.5"]
    assert summaries["ResNet-50 v1.5"].rows == 12
    assert summaries["ResNet-50 v1.5"].median_ratio == pytest.approx(statistics.median(resnet))


def test_validation_page_shows_the_image_model_rows():
    app = open_app("app_pages/validation.py", timeout_s=90)
    tables = [frame.value for frame in app.dataframe]
    images = [table for table in tables if "estimate images/s per GPU" in table.columns][0]
    assert "V001" in set(images["id"])
    why = [table for table in tables if "why not counted" in table.columns][0]
    assert "V097" in set(why["id"])
    assert any(header.value == "Image-model training throughput" for header in app.header)


def test_rows_from_containers_before_cudnn_took_5x5_depthwise_say_so():
    # pytorch PR #58749 (opened 2021-05-21) handed half 5 x 5 depthwise convolutions to cuDNN: DLE's
    # ConvNets rows ran NGC 21.03 and 20.12, older; timm's PyTorch 1.12 and a 22.11 container are newer
    def cudnn(framework):
        return vt.row_cudnn_depthwise_5x5({"framework_and_version": framework})

    assert not cudnn("PyTorch, NGC PyTorch 21.03 container (DLE ConvNets)")
    assert not cudnn("PyTorch, NGC pytorch-21.03 container (DLE ConvNets)")
    assert not cudnn("PyTorch, NGC PyTorch 20.12 container")
    assert cudnn("PyTorch, NGC PyTorch 22.11 container")
    assert cudnn("PyTorch 1.12, CUDA 11.3, timm benchmark.py (timm ~0.6.6)")
