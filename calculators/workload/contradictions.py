"""Settings that contradict the model: said next to the verdict, never left in a footnote.

A memory estimate can be right and still describe a run that makes no sense: a sequence
longer than the positions the model was trained with, or a text generator built from an
encoder. Each check returns the sentence to show, or None.
"""

from __future__ import annotations

from calculators.models.spec import ModelSpec
from calculators.workload.build import Workload


def context_problem(spec: ModelSpec, tokens: int, what: str) -> str | None:
    """`tokens` beyond the model's trained positions. Learned absolute position embeddings
    have one row per position, so a longer input cannot run at all (GPT-2, BERT:
    Radford et al. 2019; Devlin et al. 2018, arXiv 1810.04805). Rotary embeddings run past
    them, but quality falls unless the positions are scaled (Chen et al. 2023, Position
    Interpolation, arXiv 2306.15595; Peng et al. 2023, YaRN, arXiv 2309.00071)."""
    trained = spec.max_position_embeddings
    if tokens <= trained:
        return None
    if spec.position_embedding == "learned":
        return (
            f"The {what} of {tokens:,} tokens is beyond the {trained:,} positions {spec.name} has: its learned "
            f"position embedding has {trained:,} rows, so this input cannot run. The memory shown is for the "
            "settings as entered."
        )
    return (
        f"The {what} of {tokens:,} tokens is beyond the {trained:,} positions {spec.name} was trained with: "
        "it runs, but quality drops unless the rotary positions are scaled (position interpolation, YaRN)."
    )


def encoder_generation_problem(spec: ModelSpec) -> str | None:
    """An encoder with a classification head has no language-model head to generate with: a
    serving estimate of its KV cache and decode speed describes nothing real."""
    if spec.head == "lm":
        return None
    return (
        f"{spec.name} is an encoder with a classification head: it does not generate text, so the KV cache, "
        "concurrency and decode speed below describe no real server. Use a decoder model to size serving."
    )


def workload_problems(workload: Workload) -> list[str]:
    """Every contradiction between the workload's settings and its model."""
    spec = workload.model
    if workload.is_training:
        found = [context_problem(spec, workload.training.seq_len, "sequence length")]
    else:
        found = [
            encoder_generation_problem(spec),
            context_problem(spec, workload.serving.context_len, "serving context"),
        ]
    return [problem for problem in found if problem]
