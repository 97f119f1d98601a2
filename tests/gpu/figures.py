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
if kind == "train_ref":
    tps = [float(m) for m in re.findall(r"tok/s ([0-9.]+)", text)]
    if metrics:
        try:
            for line in open(metrics):
                j = json.loads(line)
                for k in ("tokens_per_s", "tok_s", "tokens_per_sec"):
                    if k in j:
                        tps.append(float(j[k]))
        except (OSError, ValueError):
            pass
    if tps:
        steady = tps[len(tps) // 2:]
        row["tokens_per_s"] = sum(steady) / len(steady)
    m = re.search(r"memory estimate: .*?= ([0-9.]+) (GiB|MiB)", text)
    if m:
        row["estimate_mib"] = float(m.group(1)) * (1024 if m.group(2) == "GiB" else 1)
else:
    bar = [float(m) for m in re.findall(r"([0-9.]+) tok/s re-routed", text)]
    if bar:
        row["tokens_per_s"] = bar[-1]
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
