"""Loads a `skipswarm export --format=hf` folder with transformers'
LlamaForCausalLM (CPU, float32), compares its logits on the exporter's
fixed batch (skipswarm_reference.safetensors) with ours, and generates a
text sample with the byte-level tokenizer. Run by tools/hf-check.sh.

  python3 tools/hf_check.py EXPORT_DIR [--prompt TEXT] [--json OUT]
Exits 1 when the largest logit difference exceeds 1e-4 of the largest
logit magnitude.
"""
import argparse
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--prompt", default="The ")
    ap.add_argument("--new_tokens", type=int, default=200)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(a.export_dir, torch_dtype=torch.float32)
    model.eval()
    ref = load_file(f"{a.export_dir}/skipswarm_reference.safetensors")
    tokens, ours = ref["tokens"], ref["logits"]
    with torch.no_grad():
        theirs = model(tokens).logits
    diff = (theirs - ours).abs()
    rel_max = (diff.max() / ours.abs().max()).item()
    rel_elem = (diff / ours.abs().clamp_min(1e-3)).median().item()
    print(f"logits {tuple(ours.shape)}: max |hf - ours| = {diff.max().item():.3e}, "
          f"relative to max |ours| = {rel_max:.3e} (tolerance {a.tolerance:.0e}); "
          f"median element-wise relative = {rel_elem:.3e}")

    prompt = torch.tensor([list(a.prompt.encode())], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=a.new_tokens, do_sample=True,
                             temperature=0.8, top_k=0, top_p=1.0, pad_token_id=0)
    text = bytes(t % 256 for t in out[0].tolist()).decode("utf-8", errors="replace")
    print("sample (transformers generate, temperature 0.8, seed 0):")
    print(text)
    figures = {"rel_max": rel_max, "rel_median_elementwise": rel_elem,
               "max_abs_diff": diff.max().item(), "tolerance": a.tolerance,
               "torch": torch.__version__,
               "transformers": __import__("transformers").__version__, "sample": text}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0 if rel_max <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
