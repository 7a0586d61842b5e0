"""One colour per thing, the same on every chart: a memory component, a vendor, an op class
or a pricing basis keeps its colour whichever page, state or subset draws it.

Colours come from Plotly's qualitative palettes (plotly.express.colors.qualitative), picked
apart so neighbours in a stacked bar differ; vendors use their brand colour family.
"""

from __future__ import annotations

from calculators.memory.result import COMPONENTS

# Memory components, in the order the engine lists them (calculators.memory.result.COMPONENTS).
COMPONENT_COLOUR = dict(
    zip(
        COMPONENTS,
        (
            "#1f77b4",  # weights: blue
            "#aec7e8",  # FP32 master weights: light blue
            "#9edae5",  # autocast weight copies: light teal
            "#d62728",  # gradients: red
            "#ff7f0e",  # optimizer states: orange
            "#ffbb78",  # optimizer step temporaries: light orange
            "#2ca02c",  # activations: green
            "#98df8a",  # logits and loss: light green
            "#c7c7c7",  # allocator reserve: light grey
            "#7f7f7f",  # CUDA context, cuBLAS, NCCL: grey
        ),
        strict=True,
    )
)

VENDOR_COLOUR = {
    "NVIDIA": "#76b900",
    "AMD": "#ed1c24",
    "Intel": "#0071c5",
    "Google": "#4285f4",
    "AWS": "#ff9900",
}
OTHER_COLOUR = "#7f7f7f"

# The step's parts (calculators.timing.operations.StepCompute.by_class_s, then traffic and the bubble).
STEP_PART_COLOUR = {
    "gemm": "#1f77b4",
    "attention": "#9467bd",
    "elementwise": "#17becf",
    "loss": "#bcbd22",
    "recompute": "#8c564b",
    "optimizer": "#ff7f0e",
    "vision": "#e377c2",
    "host launch": "#7f7f7f",
    "compute lost to hidden traffic": "#ff9896",
    "pipeline bubble": "#c7c7c7",
}
TRAFFIC_COLOUR = "#d62728"

# The serving chart's parts, in the memory chart's colours for the same things.
SERVING_PART_COLOUR = {"Weights": "#1f77b4", "KV cache": "#9467bd", "Activations": "#2ca02c", "Overhead": "#7f7f7f"}

PRICING_COLOUR = {"on demand": "#1f77b4", "spot": "#ff7f0e", "owned": "#2ca02c"}

HIGHLIGHT_LINE = dict(width=2, color="black")


def vendor_colour(vendor: str) -> str:
    return VENDOR_COLOUR.get(vendor, OTHER_COLOUR)


def step_part_colour(name: str) -> str:
    """Compute classes by name; any data-parallel, tensor-parallel or pipeline traffic in red."""
    return STEP_PART_COLOUR.get(name, TRAFFIC_COLOUR if "traffic" in name else OTHER_COLOUR)


def pricing_colour(pricing: str) -> str:
    return PRICING_COLOUR.get(pricing, OTHER_COLOUR)


# An image model's parts (calculators.memory.vision_training.PART_LABEL): the transformer's colour where the
# part is the same thing, its own where it is not.
VISION_PART_COLOUR = {
    "weights": COMPONENT_COLOUR["weights"],
    "buffers": "#17becf",  # BatchNorm buffers: teal
    "gradients": COMPONENT_COLOUR["gradients"],
    "optimizer_states": COMPONENT_COLOUR["optimizer_states"],
    "optimizer_step_temporaries": COMPONENT_COLOUR["optimizer_step_temporaries"],
    "autocast_weight_copies": COMPONENT_COLOUR["autocast_weight_copies"],
    "activations": COMPONENT_COLOUR["activations"],
    "recompute": "#bcbd22",  # one block recomputed: olive
    "backward_transient": "#9467bd",  # the backward's feature-map gradients: purple
    "inputs": "#8c564b",  # images and labels: brown
    "cudnn_workspace": "#e377c2",  # cuDNN workspace: pink
    "overheads": "#c7c7c7",  # allocator reserve, CUDA context, NCCL: light grey
}
