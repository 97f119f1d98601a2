"""Turns one gpu-check step's output (stdin) into a JSON line.

  figures.py train_ref|local PRESET BF16 RC METRICS_OR_PROGRESS_JSONL SECONDS < output

train_ref: tokens/s from its progress lines ("tok/s N") and --metrics_out,
the second half of them (past warm-up). local: tokens/s from the launcher's
progress bar ("N tok/s re-routed"), the last value (a running figure), and
the whole-run throughput line. Both: the printed memory estimate and the
sampled peak of nvidia-smi's used memory.
"""
import json
import re
import sys

kind, preset, bf16, rc, metrics, seconds = sys.argv[1:7]
text = sys.stdin.read()
row = {"step": kind, "preset": preset, "bf16": bf16 == "true", "rc": int(rc),
       "seconds": int(seconds)}
def steady_rate(points):
    """(iteration, elapsed_s, tokens) points -> tokens/s over the second half
    (past warm-up: the first iterations build kernels and caches)."""
    points = sorted(points)
    if len(points) < 3:
        return None
    mid = points[len(points) // 2]
    last = points[-1]
    tokens = sum(t for it, el, t in points if it > mid[0])
    return tokens / max(1e-9, last[1] - mid[1])


def jsonl(path):
    try:
        with open(path) as f:
            for line in f:
                try:
                    yield json.loads(line)
                except ValueError:
                    pass
    except OSError:
        return


if kind == "train_ref":
    # The progress lines' "tok/s" is a running average from the start; the
    # steady rate comes from --metrics_out's elapsed_s.
    m = re.search(r"(\d+) MBs x (\d+) x (\d+) tokens per iteration", text)
    per_it = int(m.group(1)) * int(m.group(2)) * int(m.group(3)) if m else 0
    pts = [(j["iteration"], j["elapsed_s"], 0) for j in jsonl(metrics)
           if "loss" in j and "elapsed_s" in j]
    if per_it and len(pts) >= 3:
        pts = sorted(pts)
        mid, last = pts[len(pts) // 2], pts[-1]
        row["tokens_per_s"] = (last[0] - mid[0]) * per_it / max(1e-9, last[1] - mid[1])
        row["s_per_iteration"] = (last[1] - mid[1]) / max(1, last[0] - mid[0])
    m = re.search(r"memory estimate: .*?= ([0-9.]+) (GiB|MiB)", text)
    if m:
        row["estimate_mib"] = float(m.group(1)) * (1024 if m.group(2) == "GiB" else 1)
else:
    # The data node's lines in progress.jsonl: tokens and elapsed_s per
    # iteration.
    pts = [(j["iteration"], j["elapsed_s"], j.get("tokens", 0)) for j in jsonl(metrics)
           if "loss" in j and "elapsed_s" in j]
    rate = steady_rate(pts)
    if rate:
        row["tokens_per_s"] = rate
        its = sorted(pts)
        half = its[len(its) // 2:]
        row["s_per_iteration"] = (half[-1][1] - half[0][1]) / max(1, half[-1][0] - half[0][0])
    m = re.search(r"throughput: ([0-9.]+) tokens in ([0-9.]+) s \(([0-9.]+) tok/s\)", text)
    if m:
        row["whole_run_tokens_per_s"] = float(m.group(3))
m = re.search(r"peak_mib=([0-9]+)", text)
if m:
    row["peak_used_mib"] = int(m.group(1))
# Parameters from model/presets.h; flops per token 6N + 12 L d T.
shapes = {"125m": (12, 768, 85.15e6), "350m": (24, 1024, 308.6e6)}
if preset in shapes and "tokens_per_s" in row:
    layers, d, n = shapes[preset]
    row["mfu_bf16_peak"] = row["tokens_per_s"] * (6 * n + 12 * layers * d * 1024) / 989e12
row["tail"] = text[-1500:]
print(json.dumps(row))
