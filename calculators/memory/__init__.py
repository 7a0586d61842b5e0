"""GPU memory: the peak of one training step, phase by phase (engine.estimate_memory), an
inference server's weights and KV cache (serving), and the answers built on them: does it fit,
the largest micro-batch, the fewest GPUs (fit), and the workload on every GPU (fit_matrix).

Reading order for a training step: engine -> layout (what one GPU holds) -> states (weights,
gradients, optimizer states) -> activations/ (what each block saves for backward) -> phases
(forward, loss, backward, optimizer step) -> assumptions (the notes shown with the estimate).
Vision towers, encoder-decoder models and Llama 3.2 Vision add their terms in vision,
encoder_decoder and mllama; result holds the pydantic result models.
"""
