#!/usr/bin/env python3
"""LoRA fixtures for the transformer models: random LoRAs for the committed tiny FLUX.1-dev and
SD 3.5 Medium pipelines (`flux.py`, `sd3.py`), in the formats people have, and what diffusers
computes with them fused (`load_lora_weights`, `set_adapters`, `fuse_lora`).

Writes `crates/pictor-diffusion/tests/fixtures/diffusion/lora/<flux|sd3>/`:

* `style_peft.safetensors` — adapter "a", as diffusers / PEFT / ai-toolkit save it
  (`transformer.…lora_A/lora_B`, `text_encoder[_2].…`, `lora_adapter_metadata`): every linear
  layer of the transformer that diffusers names — q, k, v (rows of the original layout's joined
  `qkv` / `linear1`), outputs, feed-forwards, the single blocks' MLP input, the modulations
  (the final one's halves exchanged in the original layout), the embedders — r=4, lora_alpha=8
  (scale 2); the CLIP encoders' attention, r=4, lora_alpha=2 (scale 0.5).
* `detail_kohya.safetensors` — adapter "b" in kohya's / sd-scripts' format under the original
  layout's names (`lora_unet_double_blocks_0_img_attn_qkv`, `lora_unet_joint_blocks_0_x_block_
  attn_qkv`: one `lora_down` for the joined q, k, v), float16 `.alpha` = 1 with r=2 (scale 0.5),
  plus `lora_te1_…` (and SD 3's `lora_te2_…`) text-encoder layers. The reference loads
  `detail_peft_equivalent.safetensors`, the same layers written as diffusers' modules (the
  joined `up` split by rows under a shared `down`, exchanged halves put back, the scale folded
  into `down`): the same change to every weight. (diffusers does not read SD 3 kohya files,
  and its FLUX kohya converter splits `linear1` with full-size FLUX.1's widths, which the tiny
  model does not have.)
* `reference.safetensors` + `reference.json` — for each case the final latents (`<case>_latents`,
  packed for FLUX) and the picture (`<case>_image`, 0..1, HWC): `none`, `a` (adapter a at 0.7,
  `fuse_lora(lora_scale=0.7)`), `ab` (a at 0.8 and b at 0.6, `set_adapters`, `fuse_lora()`).

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE /tmp/torchenv/bin/python tools/sd-fixtures/transformer_lora.py
    # needs torch, diffusers, transformers, peft, sentencepiece, protobuf
"""

import os

os.environ.setdefault("ATEN_CPU_CAPABILITY", "default")
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["DIFFUSERS_NO_ADVISORY_WARNINGS"] = "1"

import json
import platform
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.backends.mkldnn.enabled = False

import diffusers  # noqa: E402
import peft  # noqa: E402
from diffusers import FluxPipeline, StableDiffusion3Pipeline  # noqa: E402
from peft import LoraConfig, inject_adapter_in_model  # noqa: E402
from peft.utils import get_peft_model_state_dict  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion"
OUT = FIXTURES / "lora"

PROMPT = "a photo of a red car, the astronaut!"
NEGATIVE = "low quality, ugly"
SIZE = 64
T5_LEN = 24

MODELS = {
    "flux": dict(dir=FIXTURES / "flux/dev", cls=FluxPipeline, own="transformer_bfl.safetensors",
                 steps=3, guidance=3.5, seed=2718, texts=["text_encoder"]),
    "sd3": dict(dir=FIXTURES / "sd3/medium", cls=StableDiffusion3Pipeline, own="transformer_sai.safetensors",
                steps=3, guidance=4.5, seed=3141, texts=["text_encoder", "text_encoder_2"]),
}

TRANSFORMER_A = {
    "flux": ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
             "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2", "proj_mlp", "proj_out",
             "norm1.linear", "norm1_context.linear", "norm.linear", "norm_out.linear", "x_embedder",
             "context_embedder", "linear_1", "linear_2"],
    "sd3": ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out",
            "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2", "proj_out",
            "norm1.linear", "norm1_context.linear", "norm_out.linear", "context_embedder", "linear_1", "linear_2"],
}
TEXT_A = ["q_proj", "k_proj", "v_proj", "out_proj"]

# Adapter b: (original-layout module, its diffusers modules (joined by rows), halves exchanged).
B_LAYERS = {
    "flux": [
        ("double_blocks.0.img_attn.qkv", [f"transformer_blocks.0.attn.to_{x}" for x in "qkv"], False),
        ("double_blocks.0.txt_attn.qkv", [f"transformer_blocks.0.attn.add_{x}_proj" for x in "qkv"], False),
        ("double_blocks.0.img_attn.proj", ["transformer_blocks.0.attn.to_out.0"], False),
        ("double_blocks.0.img_mlp.0", ["transformer_blocks.0.ff.net.0.proj"], False),
        ("double_blocks.0.txt_mod.lin", ["transformer_blocks.0.norm1_context.linear"], False),
        ("single_blocks.0.linear1", [f"single_transformer_blocks.0.attn.to_{x}" for x in "qkv"]
         + ["single_transformer_blocks.0.proj_mlp"], False),
        ("single_blocks.1.linear2", ["single_transformer_blocks.1.proj_out"], False),
        ("single_blocks.1.modulation.lin", ["single_transformer_blocks.1.norm.linear"], False),
        ("final_layer.adaLN_modulation.1", ["norm_out.linear"], True),
        ("guidance_in.in_layer", ["time_text_embed.guidance_embedder.linear_1"], False),
    ],
    "sd3": [
        ("joint_blocks.0.x_block.attn.qkv", [f"transformer_blocks.0.attn.to_{x}" for x in "qkv"], False),
        ("joint_blocks.0.context_block.attn.qkv", [f"transformer_blocks.0.attn.add_{x}_proj" for x in "qkv"], False),
        ("joint_blocks.0.x_block.attn2.qkv", [f"transformer_blocks.0.attn2.to_{x}" for x in "qkv"], False),
        ("joint_blocks.0.x_block.mlp.fc1", ["transformer_blocks.0.ff.net.0.proj"], False),
        ("joint_blocks.1.context_block.adaLN_modulation.1", ["transformer_blocks.1.norm1_context.linear"], True),
        ("joint_blocks.1.x_block.attn.proj", ["transformer_blocks.1.attn.to_out.0"], False),
        ("final_layer.adaLN_modulation.1", ["norm_out.linear"], True),
        ("y_embedder.mlp.0", ["time_text_embed.text_embedder.linear_1"], False),
    ],
}
B_TEXT = {
    "flux": [("lora_te1_", "text_encoder", 0)],
    "sd3": [("lora_te1_", "text_encoder", 0), ("lora_te2_", "text_encoder_2", 1)],
}


def randomise(model, adapter, gen):
    """Both LoRA matrices random and moderate: A ~ N(0, 1/fan_in), B ~ N(0, 0.05²)."""
    for name, p in model.named_parameters():
        if f".{adapter}." not in name and not name.endswith(f".{adapter}.weight"):
            continue
        if "lora_A" in name:
            p.data = torch.randn(p.shape, generator=gen) / p[0].numel() ** 0.5
        elif "lora_B" in name:
            p.data = torch.randn(p.shape, generator=gen) * 0.05


def add(model, adapter, targets, r, alpha, gen):
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, init_lora_weights=False)
    inject_adapter_in_model(config, model, adapter_name=adapter)
    randomise(model, adapter, gen)
    return get_peft_model_state_dict(model, adapter_name=adapter), config.to_dict()


def load(arch):
    m = MODELS[arch]
    pipe = m["cls"].from_pretrained(m["dir"])
    pipe.set_progress_bar_config(disable=True)
    return pipe


def make_a(arch, out, gen):
    pipe = load(arch)
    sd, cfg = add(pipe.transformer, "a", TRANSFORMER_A[arch], 4, 8, gen)
    kw = {"transformer_lora_layers": sd, "transformer_lora_adapter_metadata": cfg}
    for te in MODELS[arch]["texts"]:
        tsd, tcfg = add(getattr(pipe, te), "a", TEXT_A, 4, 2, gen)
        kw[f"{te}_lora_layers"] = tsd
        kw[f"{te}_lora_adapter_metadata"] = tcfg
    type(pipe).save_lora_weights(str(out), weight_name="style_peft.safetensors", **kw)


def swap(t):
    half = t.shape[0] // 2
    return torch.cat([t[half:], t[:half]])


def make_b(arch, out, gen):
    """kohya's file under the original names, and (SD 3) the same layers as diffusers' modules."""
    r, alpha = 2, 1.0
    scale = alpha / r
    own = safe_open(str(MODELS[arch]["dir"] / MODELS[arch]["own"]), "pt")
    kohya, equivalent = {}, {}
    for module, srcs, swapped in B_LAYERS[arch]:
        key = f"{module}.weight"
        if key not in own.keys():
            key = f"model.diffusion_model.{key}"  # Stability AI's single files
        out_dim, in_dim = own.get_slice(key).get_shape()
        down = torch.randn((r, in_dim), generator=gen) / in_dim**0.5
        up = torch.randn((out_dim, r), generator=gen) * 0.05
        name = "lora_unet_" + module.replace(".", "_")
        kohya[f"{name}.lora_down.weight"] = down
        kohya[f"{name}.lora_up.weight"] = up
        kohya[f"{name}.alpha"] = torch.tensor(alpha, dtype=torch.float16)
        ups = swap(up) if swapped else up
        sizes = [in_dim] * (len(srcs) - 1)
        sizes.append(out_dim - sum(sizes))
        for src, part in zip(srcs, torch.split(ups, sizes)):
            equivalent[f"transformer.{src}.lora_A.weight"] = (down * scale).contiguous()
            equivalent[f"transformer.{src}.lora_B.weight"] = part.contiguous()
    pipe = load(arch)
    for prefix, te, _ in B_TEXT[arch]:
        enc = getattr(pipe, te)
        for layer in range(2):
            for proj in ["q_proj", "v_proj", "out_proj"]:
                # transformers 5's CLIP text models have no `text_model` level; kohya's names do.
                inner = getattr(enc, "text_model", enc)
                lin = getattr(inner.encoder.layers[layer].self_attn, proj)
                down = torch.randn((r, lin.in_features), generator=gen) / lin.in_features**0.5
                up = torch.randn((lin.out_features, r), generator=gen) * 0.05
                name = f"{prefix}text_model_encoder_layers_{layer}_self_attn_{proj}"
                kohya[f"{name}.lora_down.weight"] = down
                kohya[f"{name}.lora_up.weight"] = up
                kohya[f"{name}.alpha"] = torch.tensor(alpha, dtype=torch.float16)
                level = "text_model." if hasattr(enc, "text_model") else ""
                key = f"{te}.{level}encoder.layers.{layer}.self_attn.{proj}"
                equivalent[f"{key}.lora_A.weight"] = (down * scale).contiguous()
                equivalent[f"{key}.lora_B.weight"] = up.contiguous()
    save_file({k: v.contiguous() for k, v in kohya.items()}, str(out / "detail_kohya.safetensors"))
    save_file(equivalent, str(out / "detail_peft_equivalent.safetensors"))
    return "detail_peft_equivalent.safetensors"


def run(arch, pipe, tensors, case):
    m = MODELS[arch]
    kwargs = dict(prompt=PROMPT, height=SIZE, width=SIZE, num_inference_steps=m["steps"],
                  guidance_scale=m["guidance"], max_sequence_length=T5_LEN)
    if arch == "sd3":
        kwargs["negative_prompt"] = NEGATIVE
    for output_type in ["latent", "np"]:
        with torch.no_grad():
            r = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(m["seed"]), output_type=output_type).images
        if output_type == "latent":
            tensors[f"{case}_latents"] = r.to(torch.float32).contiguous()
        else:
            tensors[f"{case}_image"] = torch.from_numpy(np.ascontiguousarray(r[0])).to(torch.float32)


def main():
    for i, arch in enumerate(MODELS):
        out = OUT / arch
        out.mkdir(parents=True, exist_ok=True)
        gen = torch.Generator().manual_seed(20261129 + i)
        make_a(arch, out, gen)
        b_file = make_b(arch, out, gen)
        comps = ["transformer", *MODELS[arch]["texts"]]
        tensors = {}
        run(arch, load(arch), tensors, "none")
        pipe = load(arch)
        pipe.load_lora_weights(str(out), weight_name="style_peft.safetensors", adapter_name="a")
        pipe.fuse_lora(components=comps, lora_scale=0.7)
        pipe.unload_lora_weights()
        run(arch, pipe, tensors, "a")
        pipe = load(arch)
        pipe.load_lora_weights(str(out), weight_name="style_peft.safetensors", adapter_name="a")
        pipe.load_lora_weights(str(out), weight_name=b_file, adapter_name="b")
        pipe.set_adapters(["a", "b"], adapter_weights=[0.8, 0.6])
        pipe.fuse_lora(components=comps)
        pipe.unload_lora_weights()
        run(arch, pipe, tensors, "ab")
        for k in ("a", "ab"):
            d = (tensors[f"{k}_image"] - tensors["none_image"]).abs().max().item()
            print(arch, k, "largest pixel change from the LoRA:", round(d, 3))
        save_file(tensors, str(out / "reference.safetensors"))
        m = MODELS[arch]
        meta = {
            "model": str(m["dir"].relative_to(REPO)),
            "prompt": PROMPT, "negative_prompt": NEGATIVE if arch == "sd3" else "", "size": SIZE,
            "steps": m["steps"], "guidance": m["guidance"], "seed": m["seed"], "max_sequence_length": T5_LEN,
            "cases": {
                "none": [],
                "a": [["style_peft.safetensors", 0.7]],
                "ab": [["style_peft.safetensors", 0.8], ["detail_kohya.safetensors", 0.6]],
            },
            "reference_b": b_file,
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "diffusers": diffusers.__version__, "peft": peft.__version__},
        }
        (out / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
