#!/usr/bin/env python3
"""FLUX.1 GGUF fixtures (after flux.py, same venv plus `pip install gguf`).

Writes to `crates/pictor-diffusion/tests/fixtures/diffusion/flux/`:

* `dev/transformer.gguf` — the tiny dev transformer as city96's `convert.py` writes FLUX GGUFs
  with gguf-py (GGUF v3, BFL names, `general.architecture = flux`): 1-D tensors float32, 2-D
  ones Q8_0 where the row length allows (a multiple of 32), float16 otherwise. The reference is
  the float transformer's output in `dev/reference.safetensors` (`transformer_out`).
* `wide/reference.safetensors` + `reference.json` — a FLUX transformer wide enough for every
  GGUF block size (hidden 256 = 2 heads of 128 as the real model's, MLP 1024, T5 and CLIP widths
  256, 1 double and 1 single block, guidance embedder) whose weights are *not* stored: each
  BFL-named tensor is filled by `det_fill` (splitmix64 of an FNV-1a hash of the name, a value
  the Rust test regenerates exactly), converted to diffusers' layout by diffusers' own
  `convert_flux_transformer_checkpoint_to_diffusers` and run by `FluxTransformer2DModel` on
  stored inputs. The Rust test quantises these weights to Q8_0, Q5_K and Q4_K itself, writes
  GGUF files and compares with this float output.

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE /tmp/torchenv/bin/python tools/sd-fixtures/flux_gguf.py
"""

import os

os.environ.setdefault("ATEN_CPU_CAPABILITY", "default")
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["HF_HUB_OFFLINE"] = "1"

import json
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.backends.mkldnn.enabled = False

import diffusers  # noqa: E402
import gguf  # noqa: E402
from diffusers import FluxTransformer2DModel  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from flux import to_diffusers  # noqa: E402  (the BFL -> diffusers conversion, width-patched)

REPO = Path(__file__).resolve().parents[2]
FLUX = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion/flux"
MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def det_fill(name, shape, scale):
    """Uniform in [-scale, scale): value i = ((splitmix64(fnv1a(name) + i) >> 40) / 2^24 - 0.5) * 2 * scale,
    computed in float64 and rounded to float32 (exact on both sides: a 24-bit integer over 2^24)."""
    n = int(np.prod(shape))
    seed = fnv1a(name)
    u = np.array([splitmix64((seed + i) & MASK) >> 40 for i in range(n)], dtype=np.float64)
    return torch.from_numpy(((u / 16777216.0 - 0.5) * 2.0 * scale).astype(np.float32).reshape(shape))


def wide_bfl_shapes(h=256, mlp=1024, ctx=256, vec=256, cin=64):
    s = {}

    def lin(name, i, o):
        s[f"{name}.weight"] = (o, i)
        s[f"{name}.bias"] = (o,)

    lin("img_in", cin, h)
    lin("txt_in", ctx, h)
    for e, i in (("time_in", 256), ("vector_in", vec), ("guidance_in", 256)):
        lin(f"{e}.in_layer", i, h)
        lin(f"{e}.out_layer", h, h)
    d = "double_blocks.0"
    for st in ("img", "txt"):
        lin(f"{d}.{st}_mod.lin", h, 6 * h)
        lin(f"{d}.{st}_attn.qkv", h, 3 * h)
        lin(f"{d}.{st}_attn.proj", h, h)
        s[f"{d}.{st}_attn.norm.query_norm.scale"] = (128,)
        s[f"{d}.{st}_attn.norm.key_norm.scale"] = (128,)
        lin(f"{d}.{st}_mlp.0", h, mlp)
        lin(f"{d}.{st}_mlp.2", mlp, h)
    b = "single_blocks.0"
    lin(f"{b}.linear1", h, 3 * h + mlp)
    lin(f"{b}.linear2", h + mlp, h)
    lin(f"{b}.modulation.lin", h, 3 * h)
    s[f"{b}.norm.query_norm.scale"] = (128,)
    s[f"{b}.norm.key_norm.scale"] = (128,)
    lin("final_layer.adaLN_modulation.1", h, 2 * h)
    lin("final_layer.linear", h, cin)
    return s


def wide_weights():
    out = {}
    for name, shape in wide_bfl_shapes().items():
        if name.endswith(".scale"):
            out[name] = 1.0 + det_fill(name, shape, 0.2)
        elif len(shape) == 1:
            out[name] = det_fill(name, shape, 0.05)
        else:
            out[name] = det_fill(name, shape, 1.0 / np.sqrt(shape[1]))
    return out


def wide():
    out = FLUX / "wide"
    out.mkdir(parents=True, exist_ok=True)
    model = FluxTransformer2DModel(
        patch_size=1, in_channels=64, num_layers=1, num_single_layers=1, attention_head_dim=128,
        num_attention_heads=2, joint_attention_dim=256, pooled_projection_dim=256, guidance_embeds=True,
        axes_dims_rope=(16, 56, 56),
    ).eval()
    sd = to_diffusers(wide_weights(), 256)
    missing, unexpected = model.load_state_dict(sd, strict=True), None
    g = torch.Generator("cpu").manual_seed(99)
    img = torch.randn(1, 16, 64, generator=g)
    txt = torch.randn(1, 8, 256, generator=g)
    pooled = torch.randn(1, 256, generator=g)
    img_ids = torch.zeros(4, 4, 3)
    img_ids[..., 1] += torch.arange(4)[:, None]
    img_ids[..., 2] += torch.arange(4)[None, :]
    img_ids = img_ids.reshape(16, 3)
    with torch.no_grad():
        res = model(hidden_states=img, timestep=torch.tensor([0.6]), guidance=torch.tensor([4.0]),
                    pooled_projections=pooled, encoder_hidden_states=txt, txt_ids=torch.zeros(8, 3),
                    img_ids=img_ids, return_dict=False)[0]
    save_file({"img": img, "txt": txt, "pooled": pooled, "out": res.contiguous()}, out / "reference.safetensors",
              metadata={"format": "pt"})
    (out / "reference.json").write_text(json.dumps({
        "t": 0.6, "guidance": 4.0, "grid": [4, 4],
        "weights": "det_fill in tools/sd-fixtures/flux_gguf.py: scales 1 + U(±0.2), 1-D U(±0.05), 2-D U(±1/sqrt(in))",
        "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__},
    }, indent=1) + "\n")
    print("wide out", tuple(res.shape), float(res.abs().max()))


def tiny_gguf():
    sd = load_file(FLUX / "dev" / "transformer_bfl.safetensors")
    w = gguf.GGUFWriter(str(FLUX / "dev" / "transformer.gguf"), arch="flux")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    kinds = {}
    for name in sorted(sd):
        t = sd[name].float().numpy()
        if t.ndim == 1:
            q, data = gguf.GGMLQuantizationType.F32, t
        elif t.shape[-1] % 32 == 0:
            q = gguf.GGMLQuantizationType.Q8_0
            data = gguf.quants.quantize(t, q)
        else:
            q, data = gguf.GGMLQuantizationType.F16, t.astype(np.float16)
        kinds[q.name] = kinds.get(q.name, 0) + 1
        w.add_tensor(name, data, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("tiny gguf", kinds)


if __name__ == "__main__":
    wide()
    tiny_gguf()
