#!/usr/bin/env python3
"""Reference noise for Pictor's noise sources, drawn by the tools themselves.

* torch-cpu: `torch.randn(shape, generator=torch.Generator("cpu").manual_seed(seed))`, several
  calls in a row on one generator (small tensors take ATen's scalar path and its cached second
  normal; 16 and more the 16-wide `normal_fill`; odd sizes its tail), float32.
* a1111-gpu: AUTOMATIC1111's `modules/rng_philox.py` `Generator(seed).randn(shape)`, several
  calls in a row (each call is the next counter offset). A1111 is AGPL: its file is not part of
  Pictor; pass its path with --philox (from a checkout of stable-diffusion-webui v1.10.1,
  `modules/rng_philox.py`).

PyTorch's 16-wide fill has two kernels: the AVX2 one (every x86-64 CPU with AVX2, AVX-512 CPUs
included) and the portable one (ATEN_CPU_CAPABILITY=default: older x86, ARM). The script runs
torch once under each (in a subprocess, since the capability is read when torch loads) and checks
that the AVX-512 run equals the AVX2 one (it must run on an AVX-512 machine for that check;
pass --no-avx512 elsewhere).

Writes crates/pictor-diffusion/tests/fixtures/noise/{torch_cpu,torch_cpu_portable,a1111_gpu}.safetensors (one tensor
per seed and call, named `s<seed>_c<call>`) and noise.json (seeds, call shapes, versions, how
many values the two torch kernels disagree on).

    python tools/sd-fixtures/noise.py --philox /path/to/rng_philox.py
"""

import os

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

# Seeds: small, typical, the largest 32-bit, and two beyond 32 bits (A1111's Philox keys on all
# 64; torch's mt19937 on the low 32).
SEEDS = [0, 1, 42, 1234, 4294967295, 4294967296 + 7, 123456789012345]
# One generator, these draws in order: scalar path and its cache (1, 3, 15), the 16-wide fill
# (16, 17 = fill + tail, 33), latent shapes (odd sizes too), and a small one again at the end.
CALLS = [(1,), (3,), (15,), (16,), (17,), (2, 3), (33,), (1, 4, 7, 9), (4, 13, 11), (5,)]
# Big latents for a few seeds only (file size): 512x512 and 768x512 SD latents.
BIG = {42: [(1, 4, 64, 64), (1, 4, 96, 64)], 4294967295: [(1, 4, 64, 64)]}


def calls_for(seed):
    return CALLS + BIG.get(seed, []) + [(7,)]


def torch_cpu():
    out = {}
    for seed in SEEDS:
        g = torch.Generator("cpu").manual_seed(seed)
        for i, shape in enumerate(calls_for(seed)):
            out[f"s{seed}_c{i}"] = torch.randn(shape, generator=g, dtype=torch.float32).numpy()
    return out


def a1111_gpu(philox_path):
    spec = importlib.util.spec_from_file_location("rng_philox", philox_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = {}
    for seed in SEEDS:
        g = mod.Generator(seed)
        for i, shape in enumerate(calls_for(seed)):
            out[f"s{seed}_c{i}"] = np.ascontiguousarray(g.randn(shape), dtype=np.float32)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="crates/pictor-diffusion/tests/fixtures/noise")
    ap.add_argument("--philox", required=True, help="AUTOMATIC1111's modules/rng_philox.py")
    ap.add_argument("--no-avx512", action="store_true")
    ap.add_argument("--torch-only-to", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.torch_only_to:
        save_file(torch_cpu(), args.torch_only_to)
        return

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def torch_under(cap):
        tmp = out / f".{cap}.safetensors"
        env = dict(os.environ, ATEN_CPU_CAPABILITY=cap)
        subprocess.run(
            [sys.executable, __file__, "--philox", args.philox, "--torch-only-to", str(tmp)],
            env=env,
            check=True,
        )
        t = load_file(str(tmp))
        tmp.unlink()
        return t

    x86 = torch_under("avx2")
    portable = torch_under("default")
    if not args.no_avx512:
        avx512 = torch_under("avx512")
        for k in x86:
            if not np.array_equal(avx512[k].view(np.uint32), x86[k].view(np.uint32)):
                sys.exit(f"avx512 and avx2 fills differ at {k}")
    save_file(x86, str(out / "torch_cpu.safetensors"))
    save_file(portable, str(out / "torch_cpu_portable.safetensors"))
    save_file(a1111_gpu(args.philox), str(out / "a1111_gpu.safetensors"))

    differing = sum(int((x86[k].view(np.uint32) != portable[k].view(np.uint32)).sum()) for k in x86)
    meta = {
        "seeds": SEEDS,
        "calls": {str(s): [list(c) for c in calls_for(s)] for s in SEEDS},
        "torch_kernels": {
            "torch_cpu": "ATEN_CPU_CAPABILITY=avx2 (equal to avx512: checked)"
            if not args.no_avx512
            else "ATEN_CPU_CAPABILITY=avx2",
            "torch_cpu_portable": "ATEN_CPU_CAPABILITY=default",
            "values_differing": differing,
            "values": sum(v.size for v in x86.values()),
            "max_abs_diff": max(float(np.abs(x86[k] - portable[k]).max()) for k in x86),
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "glibc": platform.libc_ver()[1],
            "a1111": "stable-diffusion-webui v1.10.1 modules/rng_philox.py",
        },
    }
    (out / "noise.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta["torch_kernels"], indent=1))


if __name__ == "__main__":
    main()
