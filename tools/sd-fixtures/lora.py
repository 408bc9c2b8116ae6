#!/usr/bin/env python3
"""LoRA fixtures: random LoRAs for the committed tiny SD 1.5 and SDXL models, in the two file
formats people have (PEFT/diffusers with `lora_adapter_metadata`, and kohya/AUTOMATIC1111), and
what the diffusers pipeline computes with two of them fused (`load_lora_weights` twice,
`set_adapters` with two weights, `fuse_lora`).

For each architecture (`sd15`, `sdxl`) it writes to
`crates/pictor-diffusion/tests/fixtures/diffusion/lora/<arch>/`:

* `style_peft.safetensors` — adapter "a": UNet attention, feed-forward, projections, resnet
  convolutions (3x3: the "LoCon" path) and time embeddings, r=4, lora_alpha=8 (scale 2, kept in
  the file's metadata as diffusers >= 0.34 writes it); text encoder(s) q/k/v/out/fc1/fc2, r=4,
  lora_alpha=2 (scale 0.5).
* `detail_kohya.safetensors` — adapter "b": UNet attention projections, resnet convolutions,
  shortcuts and down/upsamplers plus text-encoder attention, r=2, saved in kohya's format
  (`lora_unet_…`, `lora_te1_…`/`lora_te2_…` for SDXL, `lora_te_…` for SD 1.5, `.alpha` = 1 as
  float16: scale 0.5). For SDXL the UNet's layer names are the original ("sgm") UNet's
  (`input_blocks_…`) as kohya's SDXL trainer writes them, translated by this script's own
  diffusers→sgm table (the inverse of AUTOMATIC1111's `convert_diffusers_name_to_compvis`).
* `reference.safetensors` + `reference.json` — for each case, the final latents (`<case>_latents`)
  and the picture (`<case>_image`, 0..1, HWC) of the Euler pipeline at 4 steps, guidance 7.5,
  seed 31337, CPU generator: case `a` (adapter a at 0.7, `fuse_lora(lora_scale=0.7)`), case `ab`
  (a at 0.8 and b at 0.6, `set_adapters`, `fuse_lora()`), case `none` (no LoRA, the baseline).

    python tools/sd-fixtures/lora.py          # needs torch, diffusers, transformers, peft
"""

import os

os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["DIFFUSERS_NO_ADVISORY_WARNINGS"] = "1"

import json
import platform
import re
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import diffusers  # noqa: E402
import peft  # noqa: E402
from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline  # noqa: E402
from diffusers.utils import convert_state_dict_to_kohya  # noqa: E402
from peft import LoraConfig, inject_adapter_in_model  # noqa: E402
from peft.utils import get_peft_model_state_dict  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion"
OUT = FIXTURES / "lora"

PROMPT = "a photo of a red car, the astronaut!"
NEGATIVE = "blurry"
SIZE = 64
STEPS = 4
GUIDANCE = 7.5
SEED = 31337

PIPELINES = {"sd15": StableDiffusionPipeline, "sdxl": StableDiffusionXLPipeline}
TEXT_ENCODERS = {"sd15": ["text_encoder"], "sdxl": ["text_encoder", "text_encoder_2"]}

UNET_A = ["to_q", "to_k", "to_v", "to_out.0", "proj_in", "proj_out", "ff.net.0.proj", "ff.net.2",
          "conv1", "conv2", "time_emb_proj"]
TEXT_A = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]
UNET_B = ["to_q", "to_v", "conv1", "conv2", "conv_shortcut", "conv"]
TEXT_B = ["q_proj", "v_proj", "out_proj"]  # diffusers infers the kohya text format from out_proj


def randomise(model, adapter, gen):
    """Both LoRA matrices random and moderate: A ~ N(0, 1/fan_in), B ~ N(0, 0.05²)."""
    for name, p in model.named_parameters():
        if f".{adapter}." not in name and not name.endswith(f".{adapter}.weight"):
            continue
        if "lora_A" in name:
            fan_in = p[0].numel()
            p.data = torch.randn(p.shape, generator=gen) / fan_in**0.5
        elif "lora_B" in name:
            p.data = torch.randn(p.shape, generator=gen) * 0.05


def add(model, adapter, targets, r, alpha, gen):
    # peft's own injection (transformers' `add_adapter` wants a newer peft than PyPI has).
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, init_lora_weights=False)
    inject_adapter_in_model(config, model, adapter_name=adapter)
    randomise(model, adapter, gen)
    sd = get_peft_model_state_dict(model, adapter_name=adapter)
    cfg = config.to_dict()
    return sd, cfg


def sgm_name(name, unet_config):
    """A diffusers UNet module name (`_`-joined) as the original UNet's (kohya's SDXL files)."""
    lpb = unet_config["layers_per_block"]
    up_attn = ["CrossAttn" in t for t in unet_config["up_block_types"]]
    res = {"conv1": "in_layers_2", "conv2": "out_layers_3", "time_emb_proj": "emb_layers_1",
           "conv_shortcut": "skip_connection"}

    def inner_res(rest):
        return res.get(rest, rest)

    m = re.fullmatch(r"down_blocks_(\d+)_(resnets|attentions)_(\d+)_(.+)", name)
    if m:
        b, kind, j, rest = int(m[1]), m[2], int(m[3]), m[4]
        i = 1 + b * (lpb + 1) + j
        return f"input_blocks_{i}_0_{inner_res(rest)}" if kind == "resnets" else f"input_blocks_{i}_1_{rest}"
    m = re.fullmatch(r"down_blocks_(\d+)_downsamplers_0_conv", name)
    if m:
        return f"input_blocks_{(int(m[1]) + 1) * (lpb + 1)}_0_op"
    m = re.fullmatch(r"mid_block_(resnets|attentions)_(\d+)_(.+)", name)
    if m:
        kind, j, rest = m[1], int(m[2]), m[3]
        return f"middle_block_{2 * j}_{inner_res(rest)}" if kind == "resnets" else f"middle_block_1_{rest}"
    m = re.fullmatch(r"up_blocks_(\d+)_(resnets|attentions)_(\d+)_(.+)", name)
    if m:
        b, kind, j, rest = int(m[1]), m[2], int(m[3]), m[4]
        i = b * (lpb + 1) + j
        return f"output_blocks_{i}_0_{inner_res(rest)}" if kind == "resnets" else f"output_blocks_{i}_1_{rest}"
    m = re.fullmatch(r"up_blocks_(\d+)_upsamplers_0_conv", name)
    if m:
        b = int(m[1])
        return f"output_blocks_{b * (lpb + 1) + lpb}_{2 if up_attn[b] else 1}_conv"
    return name


def make_loras(arch, pipe, out):
    gen = torch.Generator().manual_seed(20261128 + (arch == "sdxl"))
    tes = TEXT_ENCODERS[arch]
    # Adapter a: PEFT format with metadata.
    unet_a, unet_cfg = add(pipe.unet, "a", UNET_A, 4, 8, gen)
    kw = {"unet_lora_layers": unet_a, "unet_lora_adapter_metadata": unet_cfg}
    for te in tes:
        sd, cfg = add(getattr(pipe, te), "a", TEXT_A, 4, 2, gen)
        kw[f"{te}_lora_layers"] = sd
        kw[f"{te}_lora_adapter_metadata"] = cfg
    type(pipe).save_lora_weights(str(out), weight_name="style_peft.safetensors", **kw)
    # Adapter b: kohya format.
    unet_b, _ = add(pipe.unet, "b", UNET_B, 2, 1, gen)
    prefixed = {f"unet.{k}": v for k, v in unet_b.items()}
    for te in tes:
        sd, _ = add(getattr(pipe, te), "b", TEXT_B, 2, 1, gen)
        prefixed.update({f"{te}.{k}": v for k, v in sd.items()})
    kohya = convert_state_dict_to_kohya(prefixed)
    fixed = {}
    for k, v in kohya.items():
        name, _, suffix = k.partition(".")
        if arch == "sd15":
            name = name.replace("lora_te1_", "lora_te_")
        if arch == "sdxl" and name.startswith("lora_unet_"):
            name = "lora_unet_" + sgm_name(name[len("lora_unet_"):], pipe.unet.config)
        if suffix == "alpha":
            v = torch.tensor(1.0, dtype=torch.float16)
        fixed[f"{name}.{suffix}"] = v.contiguous()
    save_file(fixed, str(out / "detail_kohya.safetensors"))


def load(arch):
    pipe = PIPELINES[arch].from_pretrained(FIXTURES / arch / "model")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def run(pipe, tensors, case):
    kwargs = dict(prompt=PROMPT, negative_prompt=NEGATIVE, height=SIZE, width=SIZE,
                  num_inference_steps=STEPS, guidance_scale=GUIDANCE)
    for output_type in ["latent", "np"]:
        with torch.no_grad():
            r = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(SEED), output_type=output_type).images
        if output_type == "latent":
            tensors[f"{case}_latents"] = r.to(torch.float32).contiguous()
        else:
            tensors[f"{case}_image"] = torch.from_numpy(np.ascontiguousarray(r[0])).to(torch.float32)


def main():
    for arch in PIPELINES:
        out = OUT / arch
        out.mkdir(parents=True, exist_ok=True)
        make_loras(arch, load(arch), out)
        comps = ["unet", *TEXT_ENCODERS[arch]]
        tensors = {}
        run(load(arch), tensors, "none")
        pipe = load(arch)
        pipe.load_lora_weights(str(out), weight_name="style_peft.safetensors", adapter_name="a")
        pipe.fuse_lora(components=comps, lora_scale=0.7)
        pipe.unload_lora_weights()
        run(pipe, tensors, "a")
        pipe = load(arch)
        pipe.load_lora_weights(str(out), weight_name="style_peft.safetensors", adapter_name="a")
        pipe.load_lora_weights(str(out), weight_name="detail_kohya.safetensors", adapter_name="b")
        pipe.set_adapters(["a", "b"], adapter_weights=[0.8, 0.6])
        pipe.fuse_lora(components=comps)
        pipe.unload_lora_weights()
        run(pipe, tensors, "ab")
        for k in ("a", "ab"):
            d = (tensors[f"{k}_image"] - tensors["none_image"]).abs().max().item()
            print(arch, k, "largest pixel change from the LoRA:", round(d, 3))
        save_file(tensors, str(out / "reference.safetensors"))
        meta = {
            "model": f"crates/pictor-diffusion/tests/fixtures/diffusion/{arch}/model",
            "prompt": PROMPT, "negative_prompt": NEGATIVE, "size": SIZE, "steps": STEPS,
            "guidance": GUIDANCE, "seed": SEED, "sampler": "euler", "noise": "torch-cpu",
            "cases": {
                "none": [],
                "a": [["style_peft.safetensors", 0.7]],
                "ab": [["style_peft.safetensors", 0.8], ["detail_kohya.safetensors", 0.6]],
            },
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "diffusers": diffusers.__version__, "peft": peft.__version__},
        }
        (out / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
