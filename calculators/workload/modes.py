"""What the workload is: training all weights, fine-tuning with LoRA or QLoRA, or serving.

The three training modes share the training-memory engine (TrainingSettings.method);
serving has its own calculator (calculators.memory.serving)."""

MODES: tuple[str, ...] = ("train", "finetune-lora", "finetune-qlora", "inference")
MODE_LABEL = {
    "train": "Train (all weights)",
    "finetune-lora": "Fine-tune: LoRA",
    "finetune-qlora": "Fine-tune: QLoRA (4-bit base)",
    "inference": "Serve (inference)",
}
METHOD_OF_MODE = {"train": "full", "finetune-lora": "lora", "finetune-qlora": "qlora"}
MODE_OF_METHOD = {method: mode for mode, method in METHOD_OF_MODE.items()}
