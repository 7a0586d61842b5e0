"""Activations: what each block of a layer saves for backward (Korthikanti et al. 2022,
arXiv 2205.05198, Sec. 4, adjusted to what PyTorch and Hugging Face code really saves).

One module per block: linears (the inputs linears keep), norms, attention, mlp, adapters
(LoRA/QLoRA), head (embedding, LM head, logits and loss); layer assembles one layer's terms
and what checkpointing keeps of them.
"""
