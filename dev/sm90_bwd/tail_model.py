"""A list-scheduling model of the sm90 backward's causal grid (session 11, d256 runs 1-2): each CTA's
cost is its sweep in query blocks (key block n of nb sweeps nb - n per query head it owns, plus a
fixed `overhead` for K/V, the epilogue and the cluster sum), the GPU's 132 SMs take the CTAs one at
a time in launch order as they free up (one CTA an SM: the d256 kernel's 225 KB of smem), and the
model reports ideal / makespan, i.e. how much of the grid's time is not the tail. Orders: the
grid's own (each (batch, kv head) unit's key blocks longest first, unit after unit) and
bwd_tile_order.h's (key block major inside sections of `section` units).
Usage: python3 tail_model.py (prints the benched d256 shapes at 16k tokens, 8 query heads)."""
import heapq


def efficiency(costs, sms=132, overhead=3):
    free = [0.0] * sms
    for c in costs:
        t = heapq.heappop(free)
        heapq.heappush(free, t + c + overhead)
    ideal = (sum(costs) + overhead * len(costs)) / sms
    return ideal / max(free)


def costs(n_blocks, units, heads_per_cta, splits, section):
    """section 0: the grid's own order."""
    out = []
    section = section or 1
    for first in range(0, units, section):
        width = min(section, units - first)
        order = [(n, u) for n in range(n_blocks) for u in range(width)] if section > 1 else \
                [(n, 0) for n in range(n_blocks)]
        for n, _ in order:
            out += [heads_per_cta * (n_blocks - n)] * splits
    return out


def main():
    print("shape (16k tokens, h8, d256, 64-key blocks)  section: efficiency")
    for name, group, splits in (("MHA", 1, 1), ("GQA 4:1, S=2", 4, 2), ("GQA 8:1, S=2", 8, 2), ("GQA 8:1, S=4", 8, 4)):
        for s in (2048, 4096, 8192, 16384):
            b = 16384 // s
            units = b * 8 // group
            nb = s // 64
            cells = [f"{sec}: {efficiency(costs(nb, units, group // splits, splits, sec)):.3f}"
                     for sec in (0, 2, 4, 8) if sec <= units]
            print(f"{name:14s} {s // 1024:2d}k b{b}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
