"""The backward phases of the engine, worked by hand and checked against the trace.

Hand-worked figures use BERT-base (h = 768, 12 heads, FFN 3072, dropout 0.1, post-norm)
at micro-batch 8 x 512 tokens: t = 4096 tokens, 8 * 12 * 512 * 512 = 25,165,824 scores.
"""

import pytest

from calculators.memory.activations.attention import attention_backward_bytes_per_score
from calculators.memory.activations.layer import layer_activation_terms, layer_backward_peak_bytes
from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.units import GIB
from calculators.workload.training import Overheads, TrainingSettings

NO_OVERHEAD = Overheads(cuda_context_gib=0, cublas_workspace_gib=0, allocator_reserve_fraction=0, nccl_gib=0)
BERT = get_preset("bert-base-uncased")
TOKENS, SCORES = 8 * 512, 8 * 12 * 512 * 512


def settings(**changes) -> TrainingSettings:
    return TrainingSettings(overheads=NO_OVERHEAD, **changes)


@pytest.mark.parametrize(
    ("model", "precision", "bytes_per_score"),
    [
        # saved: fp32 softmax 4 + mask 1 + dropout output 4, plus the probabilities' gradient 4
        ("bert-base-uncased", "fp32", 13),
        # saved: bf16 softmax 2 + mask 1 + dropout output 2, plus the gradient 2
        ("bert-base-uncased", "bf16", 7),
        # Llama softmax in fp32 without dropout: output, its gradient and the scores' gradient
        ("llama-3.2-1b", "bf16", 12),
    ],
)
def test_attention_backward_bytes_per_score(model, precision, bytes_per_score):
    assert attention_backward_bytes_per_score(get_preset(model), settings(precision=precision)) == bytes_per_score


def test_selective_eager_layer_peaks_at_the_attention_backward_as_traced():
    """fp32, selective checkpointing, eager attention. The attention moment keeps what was saved
    up to the core: the shared q/k/v input 4*t*h and q, k, v 3*4*t*768 = 50,331,648 bytes; the
    temporaries are 13 bytes per score (327,155,712), the gradients of the attention output and
    of v 2*4*t*768 (25,165,824), the residual gradient 4*t*h (12,582,912) and the rebuilt core's
    copies of q, k, v 3*4*t*768 (37,748,736): 452,984,832 bytes. The trace of one layer holds
    432.0 MiB = 453.0 MB at that bmm beyond the embedding's tensors (bench/accuracy.py)."""
    s = settings(micro_batch=8, seq_len=512, precision="fp32", checkpointing="selective", attention="eager")
    terms = layer_activation_terms(BERT, s)
    assert sum(terms.values()) == 434_176_000
    assert layer_backward_peak_bytes(terms, BERT, s) == 452_984_832


def test_mlp_moment_adds_one_hidden_gradient_to_the_whole_layer():
    """bf16, no checkpointing, fused attention: no score matrix, so the MLP backward is the
    worst moment: the whole layer plus the gradient of the GELU output 2*t*3072 bytes."""
    s = settings(micro_batch=8, seq_len=512, precision="bf16", attention="fused")
    terms = layer_activation_terms(BERT, s)
    assert layer_backward_peak_bytes(terms, BERT, s) == sum(terms.values()) + 2 * TOKENS * 3072


def test_tied_embedding_gradients_are_summed_out_of_place_at_the_embedding_backward():
    """GPT-2 ties its LM head to the word embedding (50257 x 768): autograd holds the head's
    gradient and adds the embedding's to it, two more bf16 matrices: 2 * 2 * 50257 * 768 bytes."""
    estimate = estimate_memory(get_preset("gpt2"), settings(precision="bf16", checkpointing="full"))
    phases = estimate.phase_components_gib
    extra = phases["backward, embeddings"]["gradients"] - phases["optimizer step"]["gradients"]
    assert extra * GIB == pytest.approx(2 * 2 * 50257 * 768)


def test_the_last_layer_phase_holds_only_the_head_gradients():
    """Llama-2-7B in fp32, gradients freed after the step: when backward reaches the last layer
    only the LM head (32000 x 4096) and the final norm (4096) have gradients, 4 bytes each."""
    estimate = estimate_memory(get_preset("llama-2-7b"), settings(precision="fp32"))
    gradients = estimate.phase_components_gib["backward, last layer"]["gradients"] * GIB
    assert gradients == pytest.approx(4 * (32000 * 4096 + 4096))
    first_layer = estimate.phase_components_gib["backward, first layer"]["gradients"] * GIB
    assert first_layer == pytest.approx(4 * (estimate.parameters - 32000 * 4096))
