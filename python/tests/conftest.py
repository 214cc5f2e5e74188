"""Shared fixtures: the devices to run on (CUDA ones skip, saying why, where there is no GPU)."""

import pytest
import torch

import flashcore

NO_CUDA_REASON = "no CUDA device: torch.cuda.is_available() is False"
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA_REASON)
requires_cuda_build = pytest.mark.skipif(torch.cuda.is_available() and not flashcore.built_with_cuda(),
                                         reason="this flashcore build has no CUDA backend (no nvcc at build time)")

DEVICES = [pytest.param("cpu"), pytest.param("cuda", marks=[requires_cuda, requires_cuda_build])]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
