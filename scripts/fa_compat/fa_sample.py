"""A pytest plugin (-p fa_sample) that runs a random sample of a heavily parametrized test file
without building every case: for each test function it draws FA_SAMPLE_FRACTION of its
parameter combinations (at least one; FA_SAMPLE_SEED fixes the draw) and parametrizes it with just
those, so collecting flash_attn's 500k-case test file costs seconds instead of many minutes."""

import itertools
import math
import os
import random

import pytest
from _pytest.mark.structures import ParameterSet


def _names(argnames):
    if isinstance(argnames, str):
        return [n.strip() for n in argnames.split(",") if n.strip()]
    return list(argnames)


def _value_tuple(value, count):
    if isinstance(value, ParameterSet):
        value = value.values if count > 1 else value.values[0]
    return tuple(value) if count > 1 else (value,)


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    marks = [m for m in metafunc.definition.own_markers if m.name == "parametrize"]
    if not marks:
        return
    fraction = float(os.environ.get("FA_SAMPLE_FRACTION", "0.002"))
    rng = random.Random(f"{os.environ.get('FA_SAMPLE_SEED', '0')}:{metafunc.function.__name__}")
    axes = [(_names(m.args[0]), list(m.args[1])) for m in marks]
    size = math.prod(len(values) for _, values in axes)
    count = max(1, round(fraction * size))
    picks = set()
    while len(picks) < min(count, size):
        picks.add(tuple(rng.randrange(len(values)) for _, values in axes))
    names = list(itertools.chain.from_iterable(n for n, _ in axes))
    rows = []
    for pick in sorted(picks):
        row = ()
        for (axis_names, values), index in zip(axes, pick):
            row += _value_tuple(values[index], len(axis_names))
        rows.append(row)
    metafunc.definition.own_markers = [m for m in metafunc.definition.own_markers if m.name != "parametrize"]
    metafunc.parametrize(names, rows)


_START = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """FA_SAMPLE_BUDGET seconds (0: none) after the first case, the rest are skipped, saying so."""
    import time

    global _START
    budget = float(os.environ.get("FA_SAMPLE_BUDGET", "0"))
    _START = _START or time.monotonic()
    if budget and time.monotonic() - _START > budget:
        pytest.skip("fa_sample: time budget spent")
