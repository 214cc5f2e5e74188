#!/usr/bin/env python3
# Varlen run 2 (docs/tuning/backward_sm90.md): a list-schedule model of the sm90 varlen backward,
# each CTA a key block costing its query-block steps + c0, greedy over 132 SMs, against the padded
# dense twin; prints the predicted varlen/dense ratio for the drawn, longest-first, shortest-first
# and an LPT order. Lengths: bench/varlen_bench.py's draw. "per-head LPT" (session 12,
# bwd_varlen_order.h): every head's CTAs walk one list of the key blocks sorted by cost, heads in
# turn (the grid's y), which is what the kernel runs; "LPT" sorts all CTAs of all heads at once.
import random, math, heapq
rng=random.Random(16); lens=[]
while sum(lens)<32768: lens.append(rng.randint(128,4096))
H=16; SM=132; BM=64; BN=128
def ctas(lens, causal, order="slot"):
    out=[]
    for h in range(H):
        for n in lens:
            nb=math.ceil(n/BN); mb=math.ceil(n/BM)
            for j in range(nb):
                steps = mb - (j*BN)//BM if causal else mb
                out.append(steps)
            out.append(None)  # the empty slot
    return [c for c in out if c is not None]
def ctas_per_head_lpt(lens, causal):
    per=[]
    for n in lens:
        nb=math.ceil(n/BN); mb=math.ceil(n/BM)
        per += [mb - (j*BN)//BM if causal else mb for j in range(nb)]
    per.sort(reverse=True)
    return per*H
def makespan(costs, c0):
    heap=[0.0]*SM
    for c in costs:
        t=heapq.heappop(heap); heapq.heappush(heap, t+c+c0)
    return max(heap)
def pairs(lens,causal): return sum(n*(n+1)//2 if causal else n*n for n in lens)
for causal in (False, True):
    for c0 in (2,4,8):
        for name, L in (("random",lens),("desc",sorted(lens,reverse=True)),("asc",sorted(lens))):
            v=makespan(ctas(L,causal),c0); d=makespan(ctas([max(lens)]*len(lens),causal),c0)
            r=(pairs(L,causal)/v)/(pairs([max(lens)]*len(lens),causal)/d)
            lpt=makespan(sorted(ctas(L,causal),reverse=True),c0)
            rl=(pairs(L,causal)/lpt)/(pairs([max(lens)]*len(lens),causal)/d)
            ph=makespan(ctas_per_head_lpt(L,causal),c0)
            rp=(pairs(L,causal)/ph)/(pairs([max(lens)]*len(lens),causal)/d)
            print(f"causal={causal} c0={c0} {name}: ratio {r:.3f}  (LPT {rl:.3f}, per-head LPT {rp:.3f})")
