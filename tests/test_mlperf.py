"""MLPerf Training: the data, samples to converge, the prediction's arithmetic and the CLI contract."""

import json
import math

import pytest

from calculators.validation.mlperf import (
    HF_DEEPSPEED_RECIPES,
    NEMO_LORA_B200_CONFIGS,
    NOT_IN_CATALOGUE,
    catalogue_gpu,
    eval_schedule,
    evaluations,
    load_convergence_points,
    load_published_layouts,
    load_results,
    mlperf_table,
    ratio_groups,
    samples_to_converge,
    submission_of,
    workload_for,
)
from tests.cli_helpers import run_cli

CONTRACT_KEYS = {
    "benchmark", "round", "submitter", "system", "accelerator", "accelerators", "nodes", "global_batch_size",
    "minutes_published", "minutes_predicted", "why_not", "ratio", "usd_to_reproduce", "source",
}  # fmt: skip


def test_every_result_and_reference_point_loads_with_a_source():
    results = load_results()
    assert len(results) == 448
    assert all(result.source.startswith("https://github.com/mlcommons/") for result in results)
    assert len(load_convergence_points()) == 41


def test_samples_to_converge_is_the_olympic_mean_interpolated():
    # Llama 2 70B LoRA at batch 8: 20 runs (3 x 2688, 9 x 3072, 7 x 3456, 1 x 3840); without the
    # fastest and the slowest: (2 x 2688 + 9 x 3072 + 7 x 3456) / 18 = 57216 / 18
    assert samples_to_converge("llama2_70b_lora", 8) == pytest.approx(57216 / 18)
    # batch 16: without 3456 and one 4992: (13 x 3840 + 2 x 4224 + 2 x 4608 + 4992) / 18 = 4032;
    # batch 12 lies half way
    assert samples_to_converge("llama2_70b_lora", 12) == pytest.approx((57216 / 18 + 4032) / 2)
    # below the smallest reference batch: its point
    assert samples_to_converge("llama2_70b_lora", 4) == pytest.approx(57216 / 18)


def test_gpt3_counts_tokens_and_drops_the_outlier_reference_run():
    # batch 3072: 5 x 1,207,959,552, 1,258,291,200 and 13,790,871,552 tokens; the slowest and one
    # fastest dropped: (4 x 1,207,959,552 + 1,258,291,200) / 5 tokens, / 2048 per sequence
    assert samples_to_converge("gpt3", 3072) == pytest.approx((4 * 1_207_959_552 + 1_258_291_200) / 5 / 2048)


def test_evaluations_follow_the_benchmark_rules():
    # 70B LoRA at batch 8: every 384 sequences, FLOOR(0.125 x 8 + 2) = 3 skipped; 3,178.7
    # sequences reach the 9th evaluation point: 6 run
    schedule = eval_schedule("llama2_70b_lora", "v5.1", 8)
    assert (schedule.every_samples, schedule.eval_samples, schedule.evals_skipped) == (384, 173, 3)
    assert evaluations(57216 / 18, schedule) == 6
    assert eval_schedule("llama31_405b", "v5.0", 1152).every_samples == 46_080
    assert eval_schedule("llama31_405b", "v5.1", 1152).evals_skipped == 14  # FLOOR(0.0026 x 1152 + 12)


def test_the_prediction_is_steps_times_step_time_plus_forward_only_evaluations():
    row = next(row for row in mlperf_table("llama2_70b_lora") if row.id == "M141")  # NVIDIA Eos, 8 H100, v4.0
    assert row.accelerator == "H100-SXM5-80GB" and row.global_batch_size == 8
    # TP4 on 8 GPUs: 2 replicas of 4 micro-batches a step. 3,178.7 / 8 steps, and 6 evaluations of
    # ceil(173 / 2) = 87 sequences per replica, each a micro-batch's quarter of the step x 1/2 (a
    # forward is 2N of a frozen base's 4N FLOPs per weight)
    expected_s = (57216 / 18 / 8 + 6 * 87 / 4 / 2) * row.step_s
    assert row.minutes_predicted == pytest.approx(expected_s / 60)
    assert row.ratio == pytest.approx(row.minutes_predicted / 28.163)
    assert any("TP4" in line for line in row.assumptions) and any("fp8" in line for line in row.assumptions)


def test_cost_to_reproduce_is_hours_times_the_cheapest_instances():
    row = next(row for row in mlperf_table("llama2_70b_lora") if row.id == "M141")
    # the cheapest 8 x H100 SXM on demand in data/cloud_prices.csv: USD 23.60 an hour (Nebius)
    assert row.usd_to_reproduce == pytest.approx(28.163 / 60 * 23.6)


def test_accelerators_outside_the_catalogue_say_why_and_are_not_predicted():
    rows = [row for row in mlperf_table() if row.accelerator is None]
    assert rows and all(row.minutes_predicted is None and row.why_not for row in rows)
    assert {row.accelerator_published for row in rows} <= set(NOT_IN_CATALOGUE)


def test_bert_waits_for_an_encoder_time_model():
    row = mlperf_table("bert", "H100-SXM5-80GB")[0]
    assert row.minutes_predicted is None and "no encoder time model" in row.why_not


def test_resnet_is_epochs_of_imagenet_at_the_vision_step_time_plus_evaluations():
    """NVIDIA's 8 H100 ResNet-50 (M140, v4.0, global batch 3200: 400 images per GPU). Olympic RCP
    means: batch 1632 runs without one 33 and one 37 = 525 / 15 = 35.0 epochs; batch 3264 without
    one 34 and the 37 = 457 / 13 = 35.154; at 3200: 35.0 + 1568 / 1632 x 0.154 = 35.148 epochs.
    Evaluations every 4 epochs: ceil(35.148 / 4) = 9, each ceil(50,000 / 8) = 6,250 images per GPU
    forward only, a third of an image's step share."""
    row = next(row for row in mlperf_table("resnet") if row.id == "M140")
    assert row.accelerator == "H100-SXM5-80GB" and row.global_batch_size == 3200
    epochs = 35.0 + 1568 / 1632 * (457 / 13 - 35.0)
    assert row.samples_to_converge == pytest.approx(epochs * 1_281_167)
    expected_s = (epochs * 1_281_167 / 8 + 9 * 6250 / 3) * row.step_s / 400
    assert row.minutes_predicted == pytest.approx(expected_s / 60)
    assert row.eval_minutes == pytest.approx(9 * 6250 / 3 * row.step_s / 400 / 60)
    assert any("channels-last" in line and "DALI" in line for line in row.assumptions)


def test_the_cpu_only_resnet_trains_on_its_sockets():
    """Intel's 16-node Sapphire Rapids ResNet-50 (M030, v3.1, global batch 3264): the system json
    gives 2 sockets per node, so 32 Xeon 8480+ sockets of 3264 / 32 = 102 images each. Epochs at
    batch 3264: the olympic RCP mean 457 / 13 = 35.154; ceil(35.154 / 4) = 9 evaluations of
    ceil(50,000 / 32) = 1,563 images per socket, a third of an image's step share. The node's one
    100 GbE port shared by its 2 sockets: 50 Gb/s each."""
    row = next(row for row in mlperf_table("resnet") if row.id == "M030")
    assert row.accelerator == "Xeon-Platinum-8480+" and row.accelerators == 32 and row.why_not is None
    epochs = 457 / 13
    assert row.samples_to_converge == pytest.approx(epochs * 1_281_167)
    expected_s = (epochs * 1_281_167 / 32 + 9 * 1563 / 3) * row.step_s / 102
    assert row.minutes_predicted == pytest.approx(expected_s / 60)
    assert any("102 images per socket" in line and "50 Gb/s per socket" in line for line in row.assumptions)
    assert row.usd_to_reproduce is None  # no CPU instance in the price sheet


def test_the_cpu_only_bert_rows_stay_unpredicted_and_say_why():
    """M029, M031, M032: the same Xeon sockets (8 nodes x 2 = 16 for M032), but no encoder time model."""
    rows = {row.id: row for row in mlperf_table("bert") if row.accelerator_published == "N/A"}
    assert set(rows) == {"M029", "M031", "M032"}
    assert all(row.accelerator == "Xeon-Platinum-8480+" and row.minutes_predicted is None for row in rows.values())
    assert all("no encoder time model" in row.why_not for row in rows.values())
    assert rows["M032"].accelerators == 16


def test_done_when_llama2_70b_lora_on_eight_gpus():
    """Every 8-GPU Llama 2 70B LoRA result on H100, H200, B200, MI300X, MI325X is predicted; the
    median |ratio - 1| is reported by the bench, here only bounded loosely."""
    names = {"H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "MI300X-192GB", "MI325X-256GB"}
    rows = [row for row in mlperf_table("llama2_70b_lora") if row.accelerators == 8 and row.accelerator in names]
    scored = [row for row in rows if row.minutes_published is not None]
    assert len(scored) >= 70 and all(row.ratio is not None for row in scored)


def test_ratio_groups_give_median_and_spread():
    groups = ratio_groups(mlperf_table("llama31_405b"))
    gb200 = next(group for group in groups if group.accelerator == "GB200 (per B200 GPU)")
    assert gb200.results == gb200.predicted == 10
    assert gb200.low_ratio <= gb200.median_ratio <= gb200.high_ratio


def test_cli_json_holds_the_contract_keys(capsys):
    code, out, err = run_cli(capsys, "mlperf", "--benchmark", "llama31_405b", "--json")
    assert code == 0 and not err
    rows = json.loads(out)
    assert len(rows) == 22 and all(CONTRACT_KEYS <= set(row) for row in rows)


def test_cli_filters_by_catalogue_gpu(capsys):
    code, out, _ = run_cli(capsys, "mlperf", "--accelerator", "mi300x-192gb", "--json")
    assert code == 0 and {row["accelerator"] for row in json.loads(out)} == {"MI300X-192GB"}


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--benchmark", "llama4"), "unknown benchmark 'llama4'"),
        (("--accelerator", "H1000"), "unknown GPU 'H1000'"),
    ],
)
def test_cli_bad_input_is_one_error_line(capsys, argv, words):
    code, out, err = run_cli(capsys, "mlperf", *argv)
    assert code == 2 and not out
    assert err.startswith("error: ") and words in err and err.count("\n") == 1


def test_each_stack_is_timed_in_its_own_layout():
    rows = {row.id: row for row in mlperf_table()}
    juniper = rows["M124"]  # Juniper's DeepSpeed run on 8 H100
    assert any("DeepSpeed ZeRO-3 (overlap_comm on)" in line for line in juniper.assumptions)
    trillium = rows["M198"]  # Google's MaxText GPT-3 on 512 Trillium chips
    assert any("MaxText" in line for line in trillium.assumptions)
    assert any("int8 rate, 1836 TOPS" in line for line in trillium.assumptions)
    h100 = rows["M141"]
    assert any("delayed scaling" in line for line in h100.assumptions)


def test_llama2_70b_lora_on_eight_gpus_meets_its_targets():
    """The done-when targets: median |predicted / published - 1| within 15% and each within +-30%,
    but for Juniper's DeepSpeed run (M124), which the time model puts at half its published time even
    in the layout its own config sets: its log shows 12.7 s a step (10 steps per ~127 s between
    train_loss lines) where the time model has 7.2 s, and 3,878 sequences to converge where the
    reference points give 3,179. No coefficient is fitted to close it. NeMo's runs on NVIDIA GPUs
    take the cuDNN fused attention their configs set (NVTE_FUSED_ATTN=1, FP8_DPA=1); the 8-GPU B200 runs are timed
    in the layout and settings of their published NeMo configs (NEMO_LORA_B200_CONFIGS: TP1, cuDNN
    attention, CUDA graphs where set, NCCL_MIN_CTAS), Dell's M354 and Nebius's M407 among them: both
    ran NVFP4 matmuls, timed in FP8 (the catalogue has no FP4 rate)."""
    names = {"H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "MI300X-192GB", "MI325X-256GB"}
    rows = [
        row
        for row in mlperf_table("llama2_70b_lora")
        if row.accelerators == 8 and row.accelerator in names and row.ratio is not None
    ]
    off = sorted(abs(row.ratio - 1) for row in rows)
    assert off[len(off) // 2] <= 0.15
    assert [row.id for row in rows if abs(row.ratio - 1) > 0.3] == ["M124"]


def _workload(result_id: str):
    result = next(result for result in load_results() if result.id == result_id)
    return workload_for(submission_of(result), catalogue_gpu(result))


def test_juniper_is_timed_from_its_own_deepspeed_config():
    """training_results_v4.0 JuniperNetworks llama2_70b_lora: ds_lora_config.json stage 3, overlap_comm
    true, bf16; run.sub --per_device_train_batch_size 1 --gradient_accumulation_steps 1
    --use_gradient_checkpointing True --lora_dropout 0.1 --lora_target_modules qkv_proj,o_proj;
    utils.py flash_attention_2 on HF's eager Llama."""
    work = _workload("M124")  # 8 H100, global batch 8
    settings, time_settings = work.settings, work.time_settings
    assert (settings.zero, settings.gpus, settings.micro_batch, settings.grad_accum) == (3, 8, 1, 1)
    assert (settings.checkpointing, settings.precision, settings.lora_dropout) == ("full", "bf16-mixed", 0.1)
    assert (settings.qkv_projection, settings.lora_targets) == ("fused", "attention")
    assert (time_settings.kernels, time_settings.attention_kernel, time_settings.overlap_fraction) == (
        "eager",
        "flash2",
        1.0,
    )


def test_intel_gaudi2_is_timed_from_its_optimum_habana_config():
    """Intel-HabanaLabs llm_finetune: README runs run_llama_70B_fp8_submission.sh (--fp8), whose
    configs/ds_zero3.json sets stage 3 with overlap_comm false: the gathers are not hidden."""
    assert HF_DEEPSPEED_RECIPES["optimum-habana"].overlap_comm is False
    work = _workload("M121")  # 8 Gaudi2, global batch 8
    assert (work.settings.zero, work.settings.precision, work.settings.checkpointing) == (3, "fp8", "full")
    assert work.time_settings.overlap_fraction == 0.0
    assert work.time_settings.kernels == "fused"


def test_hf_trainer_stacks_also_evaluate_at_the_eval_delay():
    """train.py sets eval_delay = int(0.125 x 8 + 2) x eval_steps = 3 x 48 steps, and the HF Trainer
    evaluates at every multiple of eval_steps from eval_delay on: at 1,152 sequences, which the rules
    skip (Juniper's log shows the extra ~115 s between its 1,120 and 1,200 sequence losses). 3,178.7
    sequences reach the 9th evaluation point: 9 - 2 = 7 run, one more than the 6 of NeMo (M141)."""
    rows = {row.id: row for row in mlperf_table("llama2_70b_lora")}
    assert any("7 evaluations" in line for line in rows["M124"].assumptions)
    assert any("6 evaluations" in line for line in rows["M141"].assumptions)


def test_b200_lora_is_timed_from_its_published_nemo_config():
    """training_results_v5.1 Lenovo config_SR780aV3_SR680aV3_SR680aV4.sh: TP=1 CP=1 MINIBS=1, no CUDA
    graph variable; config_common.sh FP8_DPA=1, NCCL_MIN_CTAS=32. 32 blocks of B200's 148 SMs."""
    work = _workload("M379")  # Lenovo, v5.1, 8 B200, global batch 8
    settings, time_settings = work.settings, work.time_settings
    assert (settings.tensor_parallel, settings.gpus, settings.grad_accum, settings.seq_len) == (1, 8, 1, 8192)
    assert (time_settings.attention_kernel, time_settings.launch) == ("cudnn", "auto")
    assert time_settings.nccl_sm_share == pytest.approx(32 / 148)
    assert not any("NVFP4" in line for line in work.assumptions)


def test_a_system_with_its_own_config_gets_it():
    """Dell's v5.1 XE9680L config sources config_common_fp4.sh with CP=2 MINIBS=2 MCORE_CUDA_GRAPH=1:
    8 GPUs of TP1 hold 8 sequences, each split over 2 GPUs (context parallel 2): 4 replicas of 2
    GPUs, 8 / 4 = 2 sequences each a step. The same system in v5.0 (M248) ran its round's FP8 config."""
    assert ("v5.1", "1xXE9680Lx8B200-SXM-180GB") in NEMO_LORA_B200_CONFIGS
    work = _workload("M354")
    settings, time_settings = work.settings, work.time_settings
    assert (settings.seq_len, settings.gpus, settings.grad_accum) == (8192, 8, 2)
    assert (time_settings.context_parallel, time_settings.launch) == (2, "cuda-graphs")
    assert any("NVFP4" in line and "timed in FP8" in line for line in work.assumptions)
    v50 = _workload("M248")
    assert (v50.settings.seq_len, v50.time_settings.launch) == (8192, "auto")
    assert not any("NVFP4" in line for line in v50.assumptions)


def test_runs_without_a_b200_config_keep_the_default_contention():
    """H100's LoRA runs have no entry: the time model's NCCL share (24/132) stays."""
    assert _workload("M141").time_settings.nccl_sm_share == pytest.approx(24 / 132)


def test_nemo_lora_on_nvidia_runs_cudnn_attention():
    """training_results_v4.0 NVIDIA nemo/configs/config_common.sh: NVTE_FLASH_ATTN=0 NVTE_FUSED_ATTN=1
    FP8_DPA=1 (Transformer Engine's cuDNN backend); AMD's stack keeps FlashAttention-2."""
    h100 = _workload("M141")
    assert h100.time_settings.attention_kernel == "cudnn"
    assert any("cuDNN fused attention" in line for line in h100.assumptions)
    assert _workload("M240").time_settings.attention_kernel == "flash2"  # AMD, 8 MI300X


def test_published_layouts_fit_their_results():
    """Every row of data/mlperf_layouts.csv is a result's, and its TP x PP x CP divides the result's
    GPUs into replicas that split the global batch into whole micro-batches."""
    results = {result.id: result for result in load_results()}
    layouts = load_published_layouts()
    assert len(layouts) >= 90
    for result_id, layout in layouts.items():
        result = results[result_id]
        model_gpus = layout.tensor_parallel * layout.pipeline_parallel * layout.context_parallel
        assert result.accelerators_total % model_gpus == 0, result_id
        replicas = result.accelerators_total // model_gpus
        assert result.global_batch_size % (replicas * layout.micro_batch) == 0, result_id


def test_context_parallel_runs_take_the_config_and_the_ring():
    """NVIDIA's 512 GB200 Llama 3.1 8B (M402) ran config_GB200_128x4x1xtp2pp1cp4_8b.sh: TP2 CP4, so
    512 / 2 = 256 data-parallel GPUs of which 4 share each 8,192-token sequence: 64 replicas, global
    batch 64, one sequence each a step. Evaluations: 1,024 sequences over 64 replicas = 16 each, a
    forward a third of a sequence's share of the step (2N of 6N), every 12,288 sequences:
    ceil(samples / 12,288) of them. Cisco's 128 H100 (M351) ran TP2 CP1
    (config_DGXH100_16x8x1xtp2pp1cp1.sh), not context parallel."""
    work = _workload("M402")
    assert (work.settings.tensor_parallel, work.settings.gpus, work.settings.seq_len) == (2, 256, 8192)
    assert (work.time_settings.context_parallel, work.settings.grad_accum) == (4, 1)
    row = next(row for row in mlperf_table("llama31_8b") if row.id == "M402")
    evals = math.ceil(row.samples_to_converge / 12_288)
    expected_s = row.samples_to_converge / 64 * row.step_s + evals * 16 * row.step_s / 3
    assert row.minutes_predicted == pytest.approx(expected_s / 60)
    assert any("CP4" in line and "ring" in line for line in row.assumptions)
    cisco = _workload("M351")
    assert (cisco.settings.tensor_parallel, cisco.time_settings.context_parallel) == (2, 1)
