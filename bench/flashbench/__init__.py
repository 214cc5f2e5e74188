"""flashbench: flashcore against PyTorch SDPA's backends (see bench/README.md).

Modules, one job each:
  options      the command line            flops        the one FLOP count
  plan         which cells a run has       timing       CUDA-event samples with an L2 flush
  impls        how each impl is called     memory       peak memory against standard attention
  ladder_cli   the C++ CLI's rungs         worker       runs the cells on the GPU, journals each
  journal      the append-only record      supervisor   restarts the worker, writes the outputs
  results      the JSON file               report       terminal and markdown tables
  plots        matplotlib charts           context      device, clocks, versions, commit
  setup_check  what scripts/bench.sh checks first
  ncu          the Nsight Compute profile (bench/ncu_profile.py)
"""
