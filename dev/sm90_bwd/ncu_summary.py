"""Key metrics of an Nsight Compute raw CSV (device_run.sh ncu step: ncu_raw.csv), one column per profiled kernel.
Usage: python3 ncu_summary.py ncu_raw.csv [metric regex ...] (default: time, L2 hit rates by op, DRAM bytes, stalls)."""
import csv, sys, re
rows = list(csv.reader(open(sys.argv[1])))
# find header row (starts with "ID")
hi = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
hdr, units, data = rows[hi], rows[hi + 1], [r for r in rows[hi + 2:] if r and r[0].isdigit()]
pats = sys.argv[2:] or [r"gpu__time_duration.sum$", r"^lts__t_sector_hit_rate.pct$", r"lts__t_sector_op_read_hit_rate.pct$",
    r"lts__t_sector_op_red_hit_rate.pct$", r"lts__t_sectors_op_red.sum$", r"lts__t_sectors_op_read.sum$", r"dram__bytes_read.sum$",
    r"dram__bytes_write.sum$", r"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active$",
    r"sm__throughput.avg.pct_of_peak_sustained_elapsed$", r"lts__throughput.avg.pct_of_peak_sustained_elapsed$",
    r"launch__grid_size$", r"launch__cluster", r"smsp__pcsamp_warps_issue_stalled_[a-z_]+$", r"lts__t_sectors_srcunit_tex_op_read_lookup_(hit|miss).sum$",
    r"lts__t_sectors_srcunit_tex_op_red_lookup_(hit|miss).sum$", r"l1tex__m_xbar2l1tex_read_bytes.sum$", r"lts__average_gcomp", r"lts__t_sectors_lookup_(hit|miss).sum$"]
for p in pats:
    for j, h in enumerate(hdr):
        if re.search(p, h):
            vals = [d[j] if j < len(d) else "" for d in data]
            if any(v not in ("", "0", "n/a") for v in vals):
                print(f"{h[:70]:70s} {units[j][:8]:8s} " + " | ".join(f"{v:>14s}" for v in vals))
