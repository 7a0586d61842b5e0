"""What attention saves for backward: its inputs, scores and softmax (eager), the output and
log-sum-exp (fused: Dao et al. 2022, arXiv 2205.14135), q/k norms, multi-head latent attention,
rotary tables and the output projection's input.
"""

from __future__ import annotations

from calculators.memory.activations.linears import (
    dropout_mask_bytes,
    fuses_qkv,
    input_saving_linears,
    linear_inputs_saved_bytes,
)
from calculators.memory.activations.norms import norm_output_fp32, norm_saved_bytes, rmsnorm_weight_operand_bytes
from calculators.memory.states import FP8_BYTES
from calculators.models.spec import ModelSpec
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings


def attention_projections_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """The layer's 'attention_projections' term: what the q/k/v linears keep of their input
    (linear_inputs_saved_bytes, the trained ones), q, k and v as the core keeps them
    (attention_inputs_saved_bytes) with their norms (qk_norm_saved_bytes), or all of that for
    multi-head latent attention (mla_attention_saved_bytes); o's input (out_projection_input_bytes);
    the output dropout's mask."""
    mask = dropout_mask_bytes(spec, tokens)
    out_projection_input = out_projection_input_bytes(spec, settings, tokens)
    if spec.is_mla:
        return mla_attention_saved_bytes(spec, settings, tokens) + out_projection_input + mask
    qkv_names = ("qkv",) if fuses_qkv(spec, settings) else ("q", "k", "v")
    savers = len(input_saving_linears(settings).intersection(qkv_names))
    qkv_inputs = linear_inputs_saved_bytes(settings, tokens, spec.hidden_size, savers, norm_output_fp32(spec, settings))
    qkv = attention_inputs_saved_bytes(spec, settings, tokens) + qk_norm_saved_bytes(spec, settings, tokens)
    return qkv_inputs + qkv + out_projection_input + mask


def attention_core_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """The layer's 'attention_core' term. Fused (flash/SDPA): its output (heads x value head dim)
    and the fp32 log-sum-exp per head and token. Eager: attention_score_bytes per element of the
    b x heads x s x s score matrix."""
    if settings.attention == "fused":
        output = settings.precision_facts.compute_bytes * tokens * attention_output_width(spec)
        return output + log_sum_exp_bytes(spec, tokens)
    b, s = settings.micro_batch, settings.seq_len
    return attention_score_bytes(spec, settings) * b * spec.n_heads * s * s


def softmax_in_fp32(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Softmax output is fp32 under fp32 and autocast (softmax is on autocast's fp32
    list) and in Llama-style code, which calls softmax(dtype=torch.float32)."""
    # T5Attention calls softmax(scores.float()) (transformers models/t5/modeling_t5.py @6b8b757d)
    upcasting_code = spec.position_embedding in ("rope", "relative")
    dtypes = settings.precision_facts
    return dtypes.compute_bytes == 4 or dtypes.autocast or upcasting_code


def attention_score_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes saved per element of the b x heads x s x s score matrix (eager attention).

    Korthikanti Sec. 4.1 at 16 bits: softmax output 2, dropout mask 1, dropout output 2
    (5 bytes). Here the softmax output may be fp32 and the matmul with V then saves
    its own half-precision copy. Under torch.compile the scores are kept instead of the
    softmax output, with the row statistics to rebuild it.
    """
    c = settings.precision_facts.compute_bytes
    if spec.attention_sinks and not settings.compile:
        return sink_attention_score_bytes(spec, settings)
    softmax_out = softmax_output_bytes(spec, settings)
    mask = 1 if spec.dropout > 0 else 0
    probs_for_value_matmul = c if (softmax_out != c or spec.dropout > 0) else 0
    if settings.compile:
        # AOT autograd's min-cut partitioner keeps the scores in the compute dtype and the fp32
        # row max and row sum (8 bytes per row of s scores), and recomputes the softmax from
        # them (traced: measure/trace/compile_partition.py)
        return c + mask + probs_for_value_matmul + 8 / settings.seq_len
    return softmax_out + mask + probs_for_value_matmul + softcap_tanh_bytes(spec, settings)


def softmax_output_bytes(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Bytes per element of the eager attention softmax's output: fp32 where softmax_in_fp32, else
    the compute dtype. gpt-oss's softmax over the scores and the sink column runs in the dtype of
    the concatenated logits, the scores' compute dtype promoted by the sink logits' parameter dtype
    (fp32 weights under autocast or fp32; a LoRA base's half dtype), with no fp32 upcast: autocast
    leaves a softmax with an explicit dtype as it is (measure/trace/cuda_emulation.py)."""
    if spec.attention_sinks:
        dtypes = settings.precision_facts
        sinks = dtypes.frozen_weight_bytes if is_adapter_method(settings.method) else None
        return max(dtypes.compute_bytes, sinks or dtypes.weight_bytes)
    return 4 if softmax_in_fp32(spec, settings) else settings.precision_facts.compute_bytes


def sink_attention_score_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes saved per score element by gpt-oss's eager attention with sinks (transformers
    src/transformers/models/gpt_oss/modeling_gpt_oss.py @6edf5b31, eager_attention_forward): one
    learned logit per head is concatenated to each row of scores, the row max is subtracted
    (`.max(dim=-1)` keeps its int64 indices, 8 bytes per row), the softmax keeps its output, s + 1
    columns in the logits' dtype (softmax_output_bytes), and the sink column is sliced off: the
    weighted sum with v keeps that view, or, when the softmax ran in fp32 under autocast, its own
    half cast. The sliding window is only a mask: windowed layers keep full rows too. Pure bf16
    keeps about 2 bytes per score where Llama's fp32 softmax keeps 6. Traced
    (tests/test_trace_gpt_oss.py)."""
    c, s = settings.precision_facts.compute_bytes, settings.seq_len
    softmax_out = softmax_output_bytes(spec, settings)
    cast_for_value_matmul = c if softmax_out != c else 0
    return softmax_out * (s + 1) / s + 8 / s + cast_for_value_matmul


def softcap_tanh_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per score element that Gemma 2's attention soft-capping saves under eager attention:
    the scores go through `/ cap`, `tanh`, `* cap` before the mask and the softmax (huggingface/
    transformers src/transformers/models/gemma2/modeling_gemma2.py @006e8693, eager_attention_forward;
    torchtune torchtune/models/gemma2/_attention.py @bd2a0fc7 does the same). Scaling by a constant
    saves nothing; tanh saves its output, in the compute dtype, for its backward (1 - y^2).
    Flash-attention 2.6+ caps inside the kernel (`softcap=`) and saves nothing more."""
    if spec.attention_softcap is None or settings.attention != "eager" or settings.compile:
        return 0.0
    return float(settings.precision_facts.compute_bytes)


def attention_inputs_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """q, k and v as the attention core keeps them: 3 c t q_dim, since HF repeats grouped
    k/v to every head (repeat_kv) before the matmuls or SDPA. Two cases keep more (traced):
    - selective checkpointing keeps the core's inputs themselves; with RoPE under autocast and
      fp32 hidden states (full training), q and k are fp32 there (the rotation multiplies by
      cos/sin in the hidden states' dtype): +2 (4 - c) t q_dim;
    - a fused qkv projection with RoPE and no k/v repeat: v stays a view of the fused
      projection output wherever it is kept as it is (by SDPA, or by the checkpointed core),
      which keeps all of that output alive: + c t (q_dim + kv_dim)."""
    c = settings.precision_facts.compute_bytes
    saved = 3 * c * tokens * spec.q_dim
    rope = spec.position_embedding == "rope"
    # cos/sin come in the hidden states' dtype: fp32 ones leave q and k fp32 for autocast to cast
    if rope and settings.checkpointing == "selective" and settings.precision_facts.autocast_casts_hidden_states:
        saved += 2 * (4 - c) * tokens * spec.q_dim
    v_kept_as_view = settings.attention == "fused" or settings.checkpointing == "selective"
    if rope and fuses_qkv(spec, settings) and spec.n_kv_heads == spec.n_heads and v_kept_as_view:
        saved += c * tokens * (spec.q_dim + spec.kv_dim)
    return saved


def qk_norm_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What q and k RMSNorms save (Qwen3 and Gemma 3 per head, transformers Qwen3Attention:
    `self.q_norm(self.q_proj(x).view(hidden_shape))`; OLMo 2 over the whole projection,
    Olmo2Attention). The norm reads the projection's output in the compute dtype and, written as
    HF writes it, saves its fp32 upcast (4 bytes per element) and the fp32 rstd per normalised row
    (heads or kv-heads rows per token, or one), plus the normalised copy in the input dtype when
    the norm's weight trains; Liger's or torch.compile's fused norm saves the input in its own dtype
    and the rstd (norm_saved_bytes). RoPE then multiplies by cos and sin, which it saves instead of
    q and k."""
    if spec.qk_norm == "none":
        return 0.0
    c = settings.precision_facts.compute_bytes
    width = spec.q_dim + spec.kv_dim
    rows = spec.n_heads + spec.n_kv_heads if spec.qk_norm == "head" else 2
    if settings.liger or settings.compile:
        return tokens * (c * width + 4 * rows)
    normalised = rmsnorm_weight_operand_bytes(spec, c) if settings.method == "full" else 0
    return tokens * ((4 + normalised) * width + 4 * rows)


def recomputed_core_input_copies_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """Copies of q, k and v that eager attention's matmuls make and save: autocast's half
    casts of fp32 inputs, and bmm's contiguous copies of head views (torch.matmul reshapes a
    transposed (b, heads, s, d) view). Without checkpointing these copies are the q, k, v
    counted in attention_inputs_saved_bytes; under selective checkpointing the core is
    rebuilt in backward and makes them again, next to the kept inputs. RoPE makes q and k
    fresh contiguous tensors and repeat_kv makes k and v contiguous."""
    c = settings.precision_facts.compute_bytes
    rope = spec.position_embedding == "rope"
    repeated = spec.n_kv_heads != spec.n_heads
    # RoPE with fp32 cos/sin (hidden states fp32) leaves q and k fp32 for autocast to cast
    q_k_copies = 2 if (settings.precision_facts.autocast_casts_hidden_states or not rope) else 0
    v_copies = 0 if repeated else 1
    return (q_k_copies + v_copies) * c * tokens * spec.q_dim


def attention_output_width(spec: ModelSpec) -> int:
    """Width of the attention output, o's input: heads x the value head dim (q_dim, except for
    MLA, whose value heads are v_head_dim wide: DeepSeek-V3 128 against 192 for q and k)."""
    return spec.n_heads * spec.value_head_dim


def mla_attention_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What multi-head latent attention saves for backward before its core and output projection
    (DeepseekV3Attention.forward, huggingface/transformers
    src/transformers/models/deepseek_v3/modeling_deepseek_v3.py @00b676f8), per token:
    - q_a (or q, without q_lora_rank) and kv_a_proj_with_mqa read the normed hidden state: its
      input, h wide (one copy per linear under autocast, as linear_inputs_saved_bytes);
    - q_a_layernorm and kv_a_layernorm, RMSNorms over q_lora_rank and kv_lora_rank
      (norm_saved_bytes at those widths), and q_b and kv_b's inputs, their outputs (c x rank);
    - the core's inputs: query_states and key_states are torch.cat of the nope and rotated rope
      parts, fresh heads x (nope + rope) tensors each. value_states is a split view of kv_b's
      output: fused attention (and a checkpointed core) keeps the view, so all of that output
      stays alive, heads x (nope + v_head_dim); eager attention's matmul saves a contiguous
      copy of the view instead, heads x v_head_dim (torch.matmul reshapes it), and kv_b's output
      is freed. RoPE's multiplies save only cos and sin (the rotated tensors' partners need no
      gradient).
    The rotated k_rot is one head broadcast to all (expand), made whole by the cat.
    The latent norms read q_a's and kv_a's outputs, in the compute dtype whatever the residual
    stream's (latent_norm_saved_bytes).
    LoRA targets: q_a/q_b count as "q", kv_a/kv_b as "k" or "v" (the names PEFT's presets use
    for the projections they replace). Traced: tests/test_trace_mla.py."""
    c = settings.precision_facts.compute_bytes
    trained = input_saving_linears(settings)
    q_trained = "q" in trained
    kv_trained = bool(trained.intersection(("k", "v")))
    saved = linear_inputs_saved_bytes(
        settings, tokens, spec.hidden_size, int(q_trained) + int(kv_trained), norm_output_fp32(spec, settings)
    )
    if spec.q_lora_rank:
        saved += latent_norm_saved_bytes(spec, settings, tokens, spec.q_lora_rank)
        saved += c * tokens * spec.q_lora_rank if q_trained else 0
    kv_rank = spec.kv_lora_rank or 0
    saved += latent_norm_saved_bytes(spec, settings, tokens, kv_rank, shares_output_with=spec.qk_rope_head_dim)
    saved += c * tokens * kv_rank if kv_trained else 0
    nope = spec.attention_head_dim - spec.qk_rope_head_dim
    value_copied = settings.attention == "eager" and settings.checkpointing != "selective"
    kept_of_kv_b = spec.value_head_dim if value_copied else nope + spec.value_head_dim
    saved += c * tokens * (2 * spec.q_dim + spec.n_heads * kept_of_kv_b)
    return saved


def latent_norm_saved_bytes(
    spec: ModelSpec, settings: TrainingSettings, tokens: int, width: int, shares_output_with: int = 0
) -> float:
    """What one of MLA's latent RMSNorms (q_a_layernorm, kv_a_layernorm) saves. Its input is a
    linear's output, so in the compute dtype even where the residual stream is fp32 (autocast
    full training): HF's RMSNorm then saves the fp32 upcast, the rstd and the normalised tensor in
    that half dtype. Where the norm keeps its input itself (an fp32 input, which the upcast
    leaves as it is, or a fused norm), the input is kv_a's output split from the shared rope key
    (`shares_output_with` channels), and the view keeps the whole output alive."""
    c = settings.precision_facts.compute_bytes
    weight_trainable = settings.method == "full"
    saved = norm_saved_bytes(spec, settings, tokens, weight_trainable, width=width, input_bytes=c)
    keeps_input_itself = c == 4 or settings.liger or settings.compile
    return saved + (c * tokens * shares_output_with if keeps_input_itself else 0.0)


def out_projection_input_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """The attention output projection's saved input.

    Fused attention on CUDA (flash / memory-efficient SDPA) returns its output in
    (b, s, heads, d) layout, so o's input, output.transpose(1, 2).contiguous(), is the same
    storage as the output SDPA saves: counted once, in attention_core. Eager attention
    makes o's input a separate copy, saved only if o trains. A float8 o saves its own one-byte
    cast of the input in either case (linear_inputs_saved_bytes)."""
    if "o" not in input_saving_linears(settings):
        return 0.0
    if settings.precision == "fp8":  # o's own float8 cast of its input, besides SDPA's saved output
        return FP8_BYTES * tokens * attention_output_width(spec)
    if settings.attention != "eager" and not fused_output_is_copied(spec, settings):
        return 0.0
    return settings.precision_facts.compute_bytes * tokens * attention_output_width(spec)


def fused_output_is_copied(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Whether o's input is a copy of the fused attention's output rather than a view of it.

    The flash kernel allocates its output with the memory layout of q (pytorch
    aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp, mha_fwd: empty_like of q's
    (b, s, heads, d) view; measure/trace/cuda_emulation.py). Full RoPE computes q element-wise from
    a head view of the projection, so q, the output and o's input share the (b, s, heads, d)
    layout. Partial rotary (GPT-NeoX's rotary_pct, Phi-2's partial_rotary_factor) rebuilds q with
    torch.cat of the turned and the passed channels, a (b, heads, s, d)-contiguous tensor, so
    HF's transpose(1, 2) before o copies (traced: tests/test_trace_parallel_residual.py). The
    memory-efficient kernel, which fp32 takes, always writes (b, s, heads, d). Selective
    checkpointing recomputes the core, and torchtitan's per-op policy the copy, so the output and
    its copy are not both kept."""
    partial_rotary = spec.position_embedding == "rope" and spec.rotary_fraction < 1 and not spec.is_mla
    core_output_kept = settings.checkpointing not in ("selective", "op-selective")
    return partial_rotary and settings.precision_facts.compute_bytes < 4 and core_output_kept


def recomputes_attention_core(settings: TrainingSettings) -> bool:
    """Selective checkpointing rebuilds the eager attention core in backward (Korthikanti
    Sec. 5); fused attention saves no score matrix, so there is nothing to rebuild."""
    return settings.checkpointing == "selective" and settings.attention == "eager"


def log_sum_exp_bytes(spec: ModelSpec, tokens: int) -> float:
    """The fp32 log-sum-exp a fused attention kernel saves per head and token for its backward
    (FlashAttention-2, Dao 2023, arXiv 2307.08691, Algorithm 1: L = m + log(l))."""
    return 4 * tokens * spec.n_heads


def rotary_table_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The rotary cos and sin tables, built once per forward and kept by every layer's rotations
    of q and k (q * cos needs cos for q's gradient): (1, seq, rotary_dim) each in the hidden
    states' dtype, batch 1 (transformers LlamaRotaryEmbedding on position_ids of batch 1, cast
    `to(x.dtype)`). Traced: 64 B per token on a tiny Llama of 16-wide heads in bf16."""
    if spec.position_embedding != "rope":
        return 0.0
    return 2.0 * settings.seq_len * spec.rotary_dim * settings.precision_facts.residual_bytes


def attention_backward_bytes_per_score(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per element of the b x heads x s x s score matrix at the worst moment of an
    eager attention backward, the saved score-sized tensors included (torch autograd frees
    a node's saved tensors once it has run):
    - backward of probs @ V: every saved score-sized tensor (attention_score_bytes) plus the
      new gradient of the probabilities, in the compute dtype;
    - softmax backward (the dropout output and mask are gone by then): the softmax output,
      its gradient and the gradient of the scores, all in softmax's dtype
      (_softmax_backward_data), and soft-capping's tanh output (softcap_tanh_bytes), which its
      own backward reads next. Measured in the trace (bench/accuracy.py)."""
    softmax_out = softmax_output_bytes(spec, settings)
    value_matmul_moment = attention_score_bytes(spec, settings) + settings.precision_facts.compute_bytes
    # soft-capping's saved tanh output waits through the softmax backward for its own
    return max(value_matmul_moment, 3 * softmax_out + softcap_tanh_bytes(spec, settings))
