"""`time` and `cost` for an image model of the vision library: the contract's keys, the loader's
ceiling, epochs and cost, and one-line refusals."""

import json

import pytest

from calculators.timing.data_loading import images_per_s_per_core
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES
from tests.cli_helpers import run_cli

RESNET = ("--model", "resnet50", "--micro-batch", "256", "--image-size", "224", "--precision", "amp-fp16",
          "--channels-last", "--optimizer", "sgd")  # fmt: skip


def test_time_json_gives_the_contract_keys(capsys):
    code, out, _ = run_cli(capsys, "time", *RESNET, "--gpu", "A100-SXM4-80GB", "--json")
    result = json.loads(out)
    assert code == 0
    assert result["samples_per_s_per_gpu"] > 0
    assert result["hours_per_epoch"] == pytest.approx(IMAGENET_1K_TRAIN_IMAGES / result["samples_per_s_per_gpu"] / 3600)
    assert result["input_bound"] in (True, False)
    assert result["input_ceiling_images_per_s_per_gpu"] == pytest.approx(12 * images_per_s_per_core())


def test_one_core_decodes_and_resizes_222_images_per_second():
    # 600 x 400 px at 68.4 Mpx/s = 3.509 ms decode, + 1.0 ms resize = 4.509 ms per image
    assert images_per_s_per_core() == pytest.approx(1 / (240_000 / 68.4e6 + 1e-3))
    assert round(images_per_s_per_core()) == 222


def test_few_host_cores_make_the_run_input_bound(capsys):
    code, out, _ = run_cli(capsys, "time", *RESNET, "--gpu", "A100-SXM4-80GB", "--host-cores-per-gpu", "2", "--json")
    result = json.loads(out)
    assert result["input_bound"] is True
    assert result["samples_per_s_per_gpu"] == pytest.approx(2 * images_per_s_per_core())
    assert "fix I/O first" in result["warnings"][0]
    # DALI on the GPU lifts the CPU ceiling
    code, out, _ = run_cli(capsys, "time", *RESNET, "--gpu", "A100-SXM4-80GB", "--host-cores-per-gpu", "2",
                           "--data-loader", "dali-gpu", "--json")  # fmt: skip
    assert json.loads(out)["input_bound"] is False


def test_cost_json_prices_each_epoch_and_the_run(capsys):
    code, out, _ = run_cli(capsys, "cost", *RESNET, "--epochs", "90", "--dataset-samples", "100000", "--json")
    rows = json.loads(out)
    assert code == 0 and rows
    row = rows[0]
    assert row["hours_per_epoch"] == pytest.approx(100_000 / row["samples_per_s_per_gpu"] / 3600)
    assert row["hours_total"] == pytest.approx(90 * row["hours_per_epoch"])
    assert row["usd_per_epoch"] == pytest.approx(row["hours_per_epoch"] * row["usd_per_hour"])
    assert row["usd_total"] == pytest.approx(90 * row["usd_per_epoch"])


def test_text_models_gain_sequences_per_second(capsys):
    code, out, _ = run_cli(capsys, "time", "--model", "llama-3.1-8b", "--gpu", "H100-SXM5-80GB", "--seq-len", "2048",
                           "--json")  # fmt: skip
    result = json.loads(out)
    assert result["samples_per_s_per_gpu"] == pytest.approx(result["tokens_per_s_per_gpu"] / 2048)
    assert result["input_bound"] is False and result["hours_per_epoch"] > 0


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        # the same words as memory and fit (calculators.interface.vision_args.vision_choice)
        (("--precision", "fp8"), "--precision for an image model (resnet50) must be one of fp32, amp-bf16, amp-fp16"),
        (("--optimizer", "adafactor"), "--optimizer for an image model (resnet50) must be one of sgd, adamw, lamb"),
        (("--image-size", "5000"), "at most 4,096"),
        (("--model", "vit_base_patch16_224", "--image-size", "230"), "multiple of 16"),
        (("--micro-batch", "0"), "micro"),
        (("--dataset-tokens", "1e9"), "--dataset-samples"),
        (("--gpu", "EPYC-9654"), "is a CPU: it trains in fp32 or amp-bf16"),
    ],
)
def test_bad_vision_input_is_one_line(capsys, extra, words):
    code, _, err = run_cli(capsys, "time", *RESNET, "--gpu", "A100-SXM4-80GB", *extra)  # a later --gpu wins
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert words.lower() in err.lower()


def test_a_cpu_trains_in_the_time_command(capsys):
    code, out, _ = run_cli(capsys, "time", "--model", "resnet50", "--gpu", "Xeon-Platinum-8480+", "--micro-batch", "64",
                           "--precision", "amp-bf16", "--json")  # fmt: skip
    result = json.loads(out)
    assert code == 0 and result["gpu"] == "Xeon-Platinum-8480+"
    assert result["samples_per_s_per_gpu"] > 0


def test_cost_json_lists_the_cpus_priced_as_owned(capsys):
    code, out, _ = run_cli(capsys, "cost", "--model", "resnet50", "--micro-batch", "64", "--precision", "fp32",
                           "--json")  # fmt: skip
    owned = [row for row in json.loads(out) if row["provider"] == "owned"]
    assert {row["gpu"] for row in owned} == {"Xeon-Platinum-8480+", "Xeon-6-6980P", "EPYC-9654", "EPYC-9965"}
    assert all(row["usd_per_epoch"] == pytest.approx(row["hours_per_epoch"] * row["usd_per_hour"]) for row in owned)


def test_an_image_model_defaults_to_its_reference_micro_batch(capsys):
    """Without --micro-batch an image model trains at torchvision's classification reference,
    `--batch-size` default 32 images per GPU (the shared flag's 1 is a transformer's); the U-Net
    at its paper's one image; a given --micro-batch 1 stays 1."""
    code, out, _ = run_cli(capsys, "time", "--model", "resnet50", "--gpu", "RTX-3090-24GB", "--json")
    assert code == 0 and json.loads(out)["micro_batch"] == 32
    code, out, _ = run_cli(capsys, "time", "--model", "resnet50", "--gpu", "RTX-3090-24GB", "--micro-batch", "1",
                           "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["micro_batch"] == 1
    code, out, _ = run_cli(capsys, "time", "--model", "unet2d", "--gpu", "RTX-3090-24GB", "--json")
    assert code == 0 and json.loads(out)["micro_batch"] == 1
    code, out, _ = run_cli(capsys, "time", "--model", "resnet50", "--gpu", "RTX-3090-24GB")
    assert code == 0 and "micro-batch 32 on 1 x RTX-3090-24GB" in out


def test_a_text_model_keeps_the_micro_batch_of_one(capsys):
    code, out, _ = run_cli(capsys, "time", "--model", "llama-3.1-8b", "--gpu", "H100-SXM5-80GB", "--seq-len", "2048",
                           "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["tokens_per_step"] == 2048  # 1 sequence of 2,048 tokens on 1 GPU


def test_cost_cpu_vs_gpu_prints_the_pages_table_per_epoch(capsys):
    code, out, _ = run_cli(capsys, "cost", "--model", "resnet50", "--micro-batch", "64", "--cpu-vs-gpu",
                           "Xeon-Platinum-8480+", "A100-SXM4-80GB", "--json")  # fmt: skip
    rows = json.loads(out)["cpu_gpu_precision"]
    assert code == 0
    assert [(row["device"], row["precision"]) for row in rows] == [
        ("Xeon-Platinum-8480+", "fp32"),
        ("Xeon-Platinum-8480+", "amp-bf16"),
        ("A100-SXM4-80GB", "fp32"),
        ("A100-SXM4-80GB", "amp-bf16"),
    ]
    for row in rows:  # an epoch of ImageNet-1k: 1,281,167 images at the row's rate
        assert row["hours_per_epoch"] == pytest.approx(1_281_167 / row["samples_per_s"] / 3600)
        usd_per_hour = row["cloud_usd_per_hour"] or row["owned_usd_per_hour"]
        usd_per_epoch = row["cloud_usd_per_epoch"] or row["owned_usd_per_epoch"]
        assert usd_per_epoch == pytest.approx(usd_per_hour * row["hours_per_epoch"])
    # the CPU is owned (no sheet rents a bare socket), the A100 rented; AMX bf16 and tensor cores beat fp32
    assert rows[0]["cloud_usd_per_epoch"] is None and rows[2]["cloud_usd_per_epoch"] is not None
    assert rows[1]["samples_per_s"] > rows[0]["samples_per_s"] and rows[3]["samples_per_s"] > rows[2]["samples_per_s"]
    # the GPU rows are the `time` command's on the same device, precision and layout, without the CPU loader
    code, out, _ = run_cli(capsys, "time", "--model", "resnet50", "--micro-batch", "64", "--gpu", "A100-SXM4-80GB",
                           "--precision", "amp-bf16", "--channels-last", "--data-loader", "dali-gpu",
                           "--json")  # fmt: skip
    assert json.loads(out)["samples_per_s_per_gpu"] == pytest.approx(rows[3]["samples_per_s"])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--model", "resnet50", "--cpu-vs-gpu", "Xeon-9", "A100-SXM4-80GB"), "is not a CPU of data/cpus.csv"),
        (("--model", "resnet50", "--cpu-vs-gpu", "EPYC-9654", "EPYC-9965"), "is a CPU; name a GPU second"),
        (("--model", "resnet50", "--cpu-vs-gpu", "EPYC-9654", "H99"), "unknown GPU 'H99'"),
        (
            ("--model", "llama-2-7b", "--dataset-tokens", "1e9", "--cpu-vs-gpu", "EPYC-9654", "A100-SXM4-80GB"),
            "image model",
        ),
    ],
)
def test_cost_cpu_vs_gpu_refuses_in_one_line(capsys, args, words):
    code, _, err = run_cli(capsys, "cost", *args)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert words in err
