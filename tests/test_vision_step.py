"""The vision step-time model on hand-worked numbers (calculators.timing.vision_step).

A made-up device keeps the arithmetic readable: 10 TFLOPS fp32 (CUDA cores, no shape curve),
100 TFLOPS bf16/fp16, 1 TB/s of memory, 200 GB/s NVLink both ways. Its name matches no measured
part, so its GEMMs run at the default achievable fraction 0.80 x the sustained-clock factor 0.825
= 0.66 of peak (calculators.timing.operations). Its bytes move at the share of the datasheet this
project's H200 copy reached, 4,242.261 of 4,800 GB/s (vision_step.GPU_BANDWIDTH_FRACTION): 1e12 x
4242.261 / 4800 = 0.8838e12 B/s.
"""

import pytest

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.vision_training import VisionInputError
from calculators.models.vision_library import vision_model
from calculators.timing import vision_step as vs

DEVICE = GpuSpec(
    name="Made-up-GPU", vendor="test", category="datacenter", memory_gb=80, memory_bandwidth_tbps=1.0,
    fp32_tflops=10, bf16_tflops=100, fp16_tflops=100, interconnect_gbps=200, launch_year=2024,
    source="a made-up test device", as_of="2026-11-27",
)  # fmt: skip


def run(key="resnet50", **fields) -> vs.VisionStepInput:
    return vs.VisionStepInput(model=vision_model(key), **{"micro_batch": 32} | fields)


ACHIEVED_B_PER_S = 1e12 * 4242.261 / 4800  # the made-up device's 1 TB/s at the measured H200 share


def test_fp32_gemm_runs_at_the_achievable_fraction_without_the_tensor_core_curve():
    rates = vs.step_rates(DEVICE, run(precision="fp32"))
    # 2 x 1e4 x 1e3 x 1e3 = 2e10 FLOPs at 10e12 x 0.66 = 6.6e12 FLOP/s
    assert vs.gemm_s(1e4, 1e3, 1e3, 10, rates, 1e6, tensor_cores=False) == pytest.approx(2e10 / 6.6e12)
    # a GEMM that moves more bytes than it computes: 1e10 bytes at 0.8838e12 B/s
    assert vs.gemm_s(10, 10, 10, 10, rates, 1e10, tensor_cores=False) == pytest.approx(1e10 / ACHIEVED_B_PER_S)


def test_convolution_k_is_input_channels_times_kernel_area():
    # ResNet-50 layer1 3x3 convolution, 64 -> 64 channels on 56 x 56: K = 64 x 9 = 576
    layer = vs.VisionLayer(name="layer1.0.conv2", type="Conv2d", output_shape=[64, 56, 56],
                           forward_flops=2 * 56 * 56 * 64 * 576, saved_bytes=0)  # fmt: skip
    assert vs.conv_k(layer) == pytest.approx(576)
    assert not vs.is_grouped(layer, input_channels=64)


def test_grouped_convolution_is_told_by_k_below_the_input_channels():
    # ResNeXt-50 32x4d layer1 conv2: 128 channels in 32 groups of 4, 3 x 3: K = 4 x 9 = 36 < 128
    layer = vs.VisionLayer(name="layer1.0.conv2", type="Conv2d", output_shape=[128, 56, 56],
                           forward_flops=2 * 56 * 56 * 128 * 36, saved_bytes=0)  # fmt: skip
    assert vs.is_grouped(layer, input_channels=128)
    # a 1 x 1 shortcut over the block's 64 input channels (layer_inputs): K = 64, not grouped
    shortcut = vs.VisionLayer(name="layer1.0.downsample.0", type="Conv2d", output_shape=[256, 56, 56],
                              forward_flops=2 * 56 * 56 * 256 * 64, saved_bytes=0)  # fmt: skip
    assert not vs.is_grouped(shortcut, input_channels=64)


def test_batchnorm_moves_three_elements_forward_and_five_backward():
    rates = vs.step_rates(DEVICE, run(precision="fp32"))
    layer = vs.VisionLayer(name="bn1", type="BatchNorm2d", output_shape=[64, 112, 112], forward_flops=0,
                           saved_bytes=0)  # fmt: skip
    kind, (forward, backward) = vs._layer_kind_seconds(layer, [64, 112, 112], 2, 1.0, None, False, rates, False)
    elements = 2 * 64 * 112 * 112  # 1,605,632 fp32 elements at 0.8838e12 B/s
    assert kind == "elementwise"
    assert forward == pytest.approx(3 * 4 * elements / ACHIEVED_B_PER_S)
    assert backward == pytest.approx(5 * 4 * elements / ACHIEVED_B_PER_S)


def test_optimizer_step_is_bandwidth_bound():
    rates = vs.step_rates(DEVICE, run(precision="fp32"))
    # SGD with momentum and weight decay: 8 fp32 moves per parameter; 1e6 parameters at 0.8838e12 B/s
    assert vs.optimizer_seconds(1_000_000, "sgd", rates) == pytest.approx(8 * 4 * 1e6 / ACHIEVED_B_PER_S)
    assert vs.optimizer_seconds(1_000_000, "adamw", rates) == pytest.approx(10 * 4 * 1e6 / ACHIEVED_B_PER_S)


def test_data_parallel_all_reduce_of_fp32_gradients_over_nvlink():
    # 8 GPUs in one node: 200 GB/s both ways / 2 x 0.88 = 88 GB/s; ring: 2 x 7/8 x 4 bytes x 1e6
    assert vs.allreduce_seconds(DEVICE, run(gpus=8), 1_000_000) == pytest.approx(7e6 / 88e9)
    assert vs.allreduce_seconds(DEVICE, run(gpus=1), 1_000_000) == 0.0


def test_convolutions_grow_with_pixels():
    at_224 = vs.estimate_vision_step(run(precision="fp32"), DEVICE).compute_by_class_s["convolution"]
    at_448 = vs.estimate_vision_step(run(precision="fp32", image_size=448), DEVICE).compute_by_class_s["convolution"]
    # fp32 convolutions are compute-bound here and have no shape curve: 4x the pixels, 4x the time
    assert at_448 == pytest.approx(4 * at_224, rel=0.01)


def test_vit_attention_grows_with_tokens_squared():
    def attention(size):
        step = vs.estimate_vision_step(run("vit_base_patch16_224", precision="amp-bf16", image_size=size), DEVICE)
        return step.compute_by_class_s["attention"]

    # 224 / 16 = 14 -> 197 tokens with the class token; 448 / 16 = 28 -> 785
    assert attention(448) / attention(224) == pytest.approx((785 / 197) ** 2, rel=1e-6)


def test_nchw_on_tensor_cores_pays_transposes_and_fp32_does_not():
    def step(**fields):
        return vs.estimate_vision_step(run(**fields), DEVICE).step_s

    assert step(precision="amp-bf16") > step(precision="amp-bf16", channels_last=True)
    assert step(precision="fp32") == pytest.approx(step(precision="fp32", channels_last=True))


def test_images_per_second_is_the_batch_over_the_step():
    step = vs.estimate_vision_step(run(micro_batch=64, gpus=8, precision="amp-bf16"), DEVICE)
    assert step.samples_per_s_per_gpu == pytest.approx(64 / step.step_s)
    assert step.samples_per_s == pytest.approx(8 * step.samples_per_s_per_gpu)
    assert step.step_s == pytest.approx(step.compute_s + step.comm_exposed_s)


def test_a_size_the_model_cannot_take_names_the_bound():
    with pytest.raises(VisionInputError, match="multiple of 16"):
        vs.estimate_vision_step(run("vit_base_patch16_224", image_size=230), DEVICE)


def test_shape_efficiency_is_the_curve_over_its_parts_roofline():
    # H100 curve (XLA's sm_90 table), rows 16384, n = k = 256: 210.70 TFLOPS measured. Its bf16 bytes
    # 2 x (16384 x 256 + 256 x 256 + 16384 x 256) = 16,908,288 for 2 x 16384 x 256 x 256 =
    # 2,147,483,648 FLOPs: 127.0 FLOP/byte x 3.35 TB/s (H100 SXM5) x 4242.261 / 4800 (the measured share
    # of the datasheet) = 376.1 TFLOPS, below the curve's best 804.72: efficiency 210.70 / 376.1 = 0.560
    roofline_tflops = 2147483648 / 16908288 * 3.35 * 4242.261 / 4800
    assert vs.shape_efficiency(16384, 256, 256, "H100") == pytest.approx(210.70 / roofline_tflops, rel=1e-3)
    # a large square shape is compute-bound on its part: its rate over the best, 788.70 / 804.72
    assert vs.shape_efficiency(16384, 4096, 4096, "H100") == pytest.approx(788.70 / 804.72, rel=1e-3)


def test_depthwise_is_one_input_channel_per_group():
    def conv(k):
        return vs.VisionLayer(name="c", type="Conv2d", output_shape=[32, 10, 10], forward_flops=2 * 100 * 32 * k,
                              saved_bytes=0)  # fmt: skip

    assert vs.is_depthwise(conv(9)) and vs.is_depthwise(conv(25))  # 3 x 3 and 5 x 5, one channel each
    assert not vs.is_depthwise(conv(36))  # ResNeXt 32x4d: 4 channels x 9
    assert not vs.is_depthwise(conv(72))  # 8 channels x 9


def depthwise(kernel_area: int) -> vs.VisionLayer:
    return vs.VisionLayer(name="c", type="Conv2d", output_shape=[32, 10, 10],
                          forward_flops=2 * 100 * 32 * kernel_area, saved_bytes=0)  # fmt: skip


def test_depthwise_backward_takes_the_measured_ratio_of_the_kernels_that_run_it():
    # pytorch#18631 on an A100: fp32 forward 272 us, forward + backward 4.8 ms -> 16.65x (PyTorch's own
    # kernels, which an NCHW fp32 run takes); fp16 201 / 684 us -> 2.40x (cuDNN's, which every
    # channels-last run takes, fp32 or half). Neither transposes in these layouts.
    cases = (("fp32", False, 16.647), ("fp32", True, 2.403), ("amp-bf16", True, 2.403))
    for precision, channels_last, ratio in cases:
        rates = vs.step_rates(DEVICE, run(precision=precision))
        forward, backward = vs.conv_seconds(depthwise(9), 1e4, 1.0, 3200, True, channels_last, rates)
        assert backward / forward == pytest.approx(ratio, rel=1e-3)


def test_a_half_nchw_5x5_depthwise_runs_pytorchs_own_kernels_on_a_build_before_cudnn_took_them():
    # pytorch PR #58749 handed half NCHW 5 x 5 depthwise convolutions to cuDNN; before it, PyTorch's own
    # kernels (16.65x backward) ran them, and 3 x 3 ones stayed in cuDNN (2.40x). A channels-last one
    # went to cuDNN on either build.
    old_build = vs.step_rates(DEVICE, run(precision="amp-fp16", cudnn_depthwise_5x5=False))
    new_build = vs.step_rates(DEVICE, run(precision="amp-fp16"))
    assert vs.grouped_backward_over_forward(depthwise(25), False, old_build) == pytest.approx(16.647, rel=1e-3)
    assert vs.grouped_backward_over_forward(depthwise(9), False, old_build) == pytest.approx(2.403, rel=1e-3)
    assert vs.grouped_backward_over_forward(depthwise(25), True, old_build) == pytest.approx(2.403, rel=1e-3)
    assert vs.grouped_backward_over_forward(depthwise(25), False, new_build) == pytest.approx(2.403, rel=1e-3)


def test_only_cudnns_tensor_core_kernels_transpose_an_nchw_run():
    # PyTorch's own depthwise kernels take NCHW and run only in an NCHW run: no transposes; cuDNN's
    # tensor-core kernels want NHWC, so a half NCHW run transposes and a channels-last one does not
    fp32 = vs.step_rates(DEVICE, run(precision="fp32"))
    assert not vs.layout_transposes(depthwise(9), True, True, fp32)
    assert not vs.layout_transposes(depthwise(9), True, False, fp32)
    half = vs.step_rates(DEVICE, run(precision="amp-fp16"))
    assert not vs.layout_transposes(depthwise(9), True, True, half)
    assert vs.layout_transposes(depthwise(9), True, False, half)
    # the transposes: 2 extra moves of the input and output (3200 + 3200 half elements per image)
    # forward, twice that backward, on 1e4 images at 0.8838e12 B/s
    forward, backward = vs.conv_seconds(depthwise(9), 1e4, 1.0, 3200, True, False, half)
    plain_forward, plain_backward = vs.conv_seconds(depthwise(9), 1e4, 1.0, 3200, True, True, half)
    extra_s = 2 * 2 * 1e4 * (3200 + 3200) / ACHIEVED_B_PER_S
    assert forward - plain_forward == pytest.approx(extra_s)
    assert backward - plain_backward == pytest.approx(2 * extra_s)


def test_the_host_issuing_eager_kernels_is_a_floor_on_a_short_step():
    # 98 us per timed layer: a 223-layer step at least 21.85 ms however fast the GPU
    assert vs.host_seconds(223, DEVICE) == pytest.approx(223 * 98e-6)
    step = vs.estimate_vision_step(run("efficientnet_b0", micro_batch=1, precision="amp-bf16"), DEVICE)
    assert step.compute_s == pytest.approx(step.host_s) and step.host_s > sum(step.compute_by_class_s.values())


def test_timm_se_module_scales_and_averages_its_map():
    # SE-ResNeXt-101 32x4d adds, per block, SE's scale (forward read + write; backward dx 2, the full-size
    # dy x x 3 and its sum down to the gate 1, the sum of x's two gradients 3: 2 + 9 moves) and mean
    # (read; backward writes the broadcast gradient: 1 + 1) of the block's last BatchNorm output:
    # 3 x 256 x 56^2 + 4 x 512 x 28^2 + 23 x 1024 x 14^2 + 3 x 2048 x 7^2 = 8,931,328 elements per
    # image, x 13 moves
    se, plain = vs.unlisted_moves_per_image("seresnext101_32x4d"), vs.unlisted_moves_per_image("resnext101_32x4d")
    assert se[0] - plain[0] == pytest.approx(13 * 8_931_328)


def test_the_layer_after_squeeze_excitation_reads_the_scaled_map_not_the_gate():
    # torchvision EfficientNet-B0's first block: the SE scales the 32 x 112 x 112 map after the depthwise
    # convolution, then the projection convolution reads that map (SE returns `scale * input`)
    inputs = dict(zip((layer.name for layer in vs.vision_layers("efficientnet_b0")),
                      vs.layer_inputs("efficientnet_b0", 224), strict=True))  # fmt: skip
    assert inputs["features.1.0.block.1.avgpool"] == [32, 112, 112]
    assert inputs["features.1.0.block.1.fc1"] == [32, 1, 1]
    assert inputs["features.1.0.block.2.0"] == [32, 112, 112]
    # timm's SEModule takes the mean itself: its fc1 reads one pixel of 256 channels; the next block's
    # first convolution reads the 256 x 56 x 56 map
    inputs = dict(zip((layer.name for layer in vs.vision_layers("seresnext101_32x4d")),
                      vs.layer_inputs("seresnext101_32x4d", 224), strict=True))  # fmt: skip
    assert inputs["layer1.1.se.fc1"] == [256, 1, 1]
    assert inputs["layer1.2.conv1"] == [256, 56, 56]


def test_a_resnet_shortcut_convolution_reads_the_blocks_input():
    # torchvision ResNet-50: `identity = self.downsample(x)`, traced after the block's bn3; layer1.0
    # takes the 64 x 56 x 56 max-pooled map, layer2.0 the 256 x 56 x 56 output of layer1
    inputs = dict(zip((layer.name for layer in vs.vision_layers("resnet50")), vs.layer_inputs("resnet50", 224),
                      strict=True))  # fmt: skip
    assert inputs["layer1.0.downsample.0"] == [64, 56, 56]
    assert inputs["layer2.0.downsample.0"] == [256, 56, 56]
    assert inputs["layer2.0.downsample.1"] == [512, 28, 28]
