"""Activations: what each block of a layer saves for backward (Korthikanti et al. 2022,
arXiv 2205.05198, Sec. 4, adjusted to what PyTorch and Hugging Face code really saves).

One module per block: linears (the inputs linears keep), norms, attention, mlp, adapters
(LoRA/QLoRA), head (embedding, LM head, logits and loss); layer assembles one layer's terms
and what checkpointing keeps of them.

One layer's terms, as layer.layer_activation_terms returns them (no checkpointing), each then
divided by the tensor-parallel degree (per_rank, sequence parallelism). Per token of the
micro-batch's T = b x s (settings.tokens); h hidden size, f the MLP's width (layer_ffn_width),
n heads, s sequence length, d_q and d_kv the q and k/v widths, d_v = n x the value head dim;
c and r the bytes of the compute dtype and of the hidden states (settings.precision_facts:
compute_bytes, residual_bytes); w the bytes of the normed copy an RMSNorm keeps for its weight
(r; 4 for Gemma's); k experts per token (1 outside a sparse MoE layer), E experts, R the LoRA
rank; masks only with dropout.

+------------------------+----------------------------------------------------+--------------------------------------+
| term: what it is       | bytes per token (x T for the micro-batch)          | computed by (module); source         |
+========================+====================================================+======================================+
| norms:                 | N x norm - shared (N = norms_per_layer); one norm: | layer_norms_saved_bytes,             |
| the layer's norms:     | - LayerNorm: (4 under autocast, else r) h + 8      | norm_saved_bytes,                    |
| each one's saved input |   (fp32 mean and rstd); under autocast a half      | parallel_residual_shared_bytes       |
| (or fp32 upcast) and   |   (LoRA) base's weight and bias also keep fp32     | (norms);                             |
| statistics             |   casts                                            | torch native_layer_norm, HF          |
|                        | - HF RMSNorm: 4 h (fp32 upcast) + 4 (rstd) + w h   | LlamaRMSNorm and T5LayerNorm, Liger  |
|                        |   (the normed copy, when its weight trains) + r h  | LigerRMSNormFunction, traced         |
|                        |   (T5's half input)                                |                                      |
|                        | - fused (Liger, compile): r h + 4                  |                                      |
|                        | shared: what a parallel block's norms save once    |                                      |
+------------------------+----------------------------------------------------+--------------------------------------+
| attention_projections: | L c h, the q/k/v linears' input (L: the trained    | attention_projections_saved_bytes,   |
| q/k/v's inputs, q, k   | ones under autocast with an fp32 input, else one   | linear_inputs_saved_bytes,           |
| and v as the core      | copy; float8: L h)                                 | attention_inputs_saved_bytes,        |
| keeps them, o's input, | + 3 c d_q (k and v repeated to every head; more    | qk_norm_saved_bytes,                 |
| the output dropout's   | under selective checkpointing, or with a fused     | out_projection_input_bytes           |
| mask                   | qkv's view)                                        | (attention, linears);                |
|                        | + q/k norms: (4 + w') (d_q + d_kv) + 4 x rows (w': | Korthikanti Sec. 4.1, HF repeat_kv,  |
|                        | the normed copy, c, Gemma's 4, none when frozen;   | traced                               |
|                        | Liger or compile: c (d_q + d_kv) + 4 x rows)       |                                      |
|                        | + c d_v (o's input, when o trains: eager           |                                      |
|                        | attention, or a partial rotary's copy; float8:     |                                      |
|                        | d_v)                                               |                                      |
|                        | + h (the dropout's 1-byte mask)                    |                                      |
|                        | MLA: mla_attention_saved_bytes for the q/k/v part  |                                      |
+------------------------+----------------------------------------------------+--------------------------------------+
| attention_core:        | fused: c d_v + 4 n                                 | attention_core_saved_bytes,          |
| fused: the kernel's    | eager: n s x score, score = the softmax's output   | attention_score_bytes,               |
| output and             | (4 when in fp32, else c) + 1 (dropout's mask) + c  | softmax_in_fp32 (attention);         |
| log-sum-exp; eager:    | (what P V keeps: a half cast or the dropout's      | Dao et al. 2022 (fused), Korthikanti |
| the score-sized        | output) + c (Gemma 2's tanh); compile keeps c of   | Sec. 4.1 (5 n s at 16 bits), traced  |
| tensors                | scores instead of the softmax, + 8 / s (row max    |                                      |
|                        | and sum)                                           |                                      |
+------------------------+----------------------------------------------------+--------------------------------------+
| mlp:                   | inputs + k (a + o) f + h (mask) + f (T5's inner    | mlp_saved_bytes,                     |
| the MLP's input,       | mask)                                              | mlp_inputs_saved_bytes,              |
| hidden tensors and the | - inputs: L c h; a sparse MoE layer: the router's  | mlp_hidden_saved_bytes_per_element,  |
| output dropout's mask  |   c h + k L c h (gathered) + k (r + c) h           | mlp_activation_saved_bytes,          |
|                        |   (weighting) + 4 E + (28 + c) k + 4 (routing; 32  | router_bookkeeping_bytes (mlp);      |
|                        |   k for an fp32 normed input) + DeepSeek's fp32    | Korthikanti Sec. 4.1, HF             |
|                        |   router's copies                                  | MixtralSparseMoeBlock, Liger swiglu, |
|                        | - a: the activation's tensors: gated 3 c (Liger or | traced                               |
|                        |   compile SwiGLU 2 c, gpt-oss 6 c); GELU c; ReLU   |                                      |
|                        |   0; gelu_new written out 4 c (12 + c under        |                                      |
|                        |   autocast), gated + 2 c (+ 4 + c under autocast)  |                                      |
|                        | - o: down's (fc2's) input, c when it trains or     |                                      |
|                        |   after ReLU; 1 in float8                          |                                      |
|                        | (k = 1 in a dense layer)                           |                                      |
+------------------------+----------------------------------------------------+--------------------------------------+
| shared_experts:        | inputs + (a + o) f_shared + c (h + 1) (Qwen2-MoE's | shared_experts_saved_bytes,          |
| a sparse MoE layer's   | sigmoid gate)                                      | shared_expert_inputs_saved_bytes     |
| shared experts, run on | - inputs: each trained input linear's (and gate's) | (mlp);                               |
| every token            |   half cast when autocast casts the normed input;  | DeepseekV3MoE,                       |
|                        |   c h once under LoRA; else none (the router keeps | Qwen2MoeSparseMoeBlock, traced       |
|                        |   it)                                              |                                      |
+------------------------+----------------------------------------------------+--------------------------------------+
| lora_adapters:         | c R per adapted linear (an expert's: k c R)        | lora_adapter_saved_bytes,            |
| LoRA/QLoRA adapters'   | + c x the adapted q/k/v widths (litgpt's zero      | lora_intermediate_bytes,             |
| own tensors            | padding of a fused qkv)                            | lora_zero_pad_bytes,                 |
|                        | + per LoRA dropout (1 + c) x width (its mask and   | lora_dropout_bytes (adapters);       |
|                        | output) - c x width (the input's counted copy,     | Hu et al. 2021, PEFT lora/layer.py,  |
|                        | which no adapter keeps then); 1 x width (the mask) | lit_gpt/lora.py, traced              |
|                        | when autocast casts its fp32 input                 |                                      |
+------------------------+----------------------------------------------------+--------------------------------------+

Under LoRA a linear without an adapter saves no input (the q/k/v, gate/up or down inputs drop
out when untargeted, o's only under eager attention; input_saving_linears); the activation
functions and multiplies still save theirs; the frozen norm weights need no normed copy; under
QLoRA with bitsandbytes every quantised linear saves its input. What a layer keeps until its
backward under each checkpointing (kept_per_layer_bytes) and its backward's peak
(layer_backward_peak_bytes) are layer.py's.
"""
