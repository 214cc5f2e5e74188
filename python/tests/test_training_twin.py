"""Issue 16's training check: flashcore's varlen + window + dropout attention trains like its SDPA
twin (training_twin.py). Here a short run on each device (CI runs the CPU one); the few-hundred-step
run on a GPU is scripts/train_compare.py, its curves in bench/results/."""

import training_twin


def test_varlen_window_dropout_training_matches_sdpa_twin(device):
    result = training_twin.compare(device, steps=30, docs_per_step=4, block=10)
    flash = result["losses"]["flash"]
    assert sum(flash[-5:]) < sum(flash[:5]), f"the loss did not go down: {flash}"
    diffs = result["max_block_diff"]
    # Within noise: flashcore differs from the twin by no more than twice what the twin differs
    # from itself under another dropout seed (and 0.05 nats, for a short run's small noise).
    bound = max(2 * diffs["twin_a_vs_twin_b"], 0.05)
    assert diffs["flash_vs_twin_a"] <= bound, f"{diffs}, bound {bound}"
