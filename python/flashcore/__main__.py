"""`python -m flashcore`: what the installed package holds (version, GPU kernel families, CUDA)."""

from flashcore import _library, _threads


def main():
    info = _library.build_info()
    print(f"flashcore {info['version']}")
    families = " ".join(info["kernel_families"]) or "none (a CPU-only build: the CPU backend only)"
    print(f"  kernel families  {families}")
    if info["with_cuda"]:
        print(f"  GPU code         {info['cuda_architectures']}")
        print(f"  CUDA             {info['cuda_version']}")
    print(f"  library          {info['library']}")
    where = ("PyTorch's OpenMP threads (" + str(_threads.torch_openmp_runtime()) + ")"
             if _threads.CPU_THREADS == "torch" else "flashcore's own pool")
    print(f"  CPU threads      {where}")


if __name__ == "__main__":
    main()
