"""The Pareto front of time against cost, for the Cost page's options and the planner's plans alike."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TypeVar

Item = TypeVar("Item")
TimeAndCost = Callable[[Item], tuple[float | None, float | None]]


def time_cost_front(items: Iterable[Item], time_and_cost: TimeAndCost) -> list[Item]:
    """The items no other item beats on both time and cost, fastest first.

    `time_and_cost(item)` gives the item's (time, cost); an item whose time or cost is None is left
    out. Items are ordered by (time, cost), and each one cheaper than every faster one is kept: of
    exact ties the first in `items` is kept.
    """
    points = [(item, *time_and_cost(item)) for item in items]
    points = [(item, time, cost) for item, time, cost in points if time is not None and cost is not None]
    front: list[Item] = []
    best_cost = math.inf
    for item, _, cost in sorted(points, key=lambda point: (point[1], point[2])):
        if cost < best_cost:
            front.append(item)
            best_cost = cost
    return front
