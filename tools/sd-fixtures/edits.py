#!/usr/bin/env python3
"""Reference edits for Pictor's parity tests: InstructPix2Pix, SD inpainting (9-channel UNet) and
masked img2img (a plain 4-channel UNet), computed by diffusers' own pipelines on tiny random models.

The models are the committed tiny SD 1.5 (`crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model`)
with its UNet replaced: an 8-input-channel UNet (InstructPix2Pix: latents + the source's VAE latents)
and a 9-input-channel one (inpainting: latents + mask + masked-image latents), both otherwise shaped
like the tiny SD 1.5 UNet, randomly initialised and rounded to the float16 grid. The text encoder,
tokenizer, VAE and scheduler configuration are the SD 1.5 fixture's (the tests assemble the folders
from it, so only the UNets are committed), plus the InstructPix2Pix model as one single-file
checkpoint in the original (LDM) naming, float16, as A1111 / ComfyUI users have it.

Noise: every case passes `generator=torch.Generator("cpu").manual_seed(seed)` to the pipeline, which
draws, in order, whatever the pipeline draws (initial latents, VAE posterior samples, each ancestral
step's noise); Pictor's `torch-cpu` noise source reproduces that stream (run with
ATEN_CPU_CAPABILITY=avx2, the kernel it reproduces bit for bit).

Writes crates/pictor-diffusion/tests/fixtures/diffusion/edits/:
  ip2p_unet/, inpaint_unet/        the UNets (config.json + diffusion_pytorch_model.safetensors)
  ip2p_single_file.safetensors     the InstructPix2Pix model as one file (fp16, LDM keys)
  reference.safetensors            source (uint8 HWC), mask (uint8 HW, 255 = change), and for each
                                   case <case>_latents and <case>_image (float 0..1, HWC)
  reference.json                   the cases' settings and the versions used

    ATEN_CPU_CAPABILITY=avx2 python tools/sd-fixtures/edits.py     (same venv as generate.py, ~10 s)
"""

import os

os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["SD_FIXTURES_UNPINNED"] = "1"  # generate.py is imported for its converters only
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["DIFFUSERS_NO_ADVISORY_WARNINGS"] = "1"

import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402

import diffusers  # noqa: E402
from diffusers import (  # noqa: E402
    DDIMScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    StableDiffusionInpaintPipeline,
    StableDiffusionInstructPix2PixPipeline,
    UNet2DConditionModel,
)
from PIL import Image  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
SD15 = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model"
OUT = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion/edits"

SIZE = 64
NEGATIVE = "blurry"
INSTRUCTION = "make it a snowy winter night!"
INPAINT_PROMPT = "a red car, the astronaut!"
# The area to change: rows 16..48, columns 24..56 (x = column, y = row); 255 = change.
MASK_BOX = (24, 16, 56, 48)

# case -> settings. pipe: ip2p | inpaint (9-channel UNet) | masked (the plain SD 1.5 UNet).
CASES = {
    "ip2p_euler_a": dict(pipe="ip2p", sampler="euler_a", steps=4, guidance=7.5, image_guidance=1.5, seed=11),
    "ip2p_ddim": dict(pipe="ip2p", sampler="ddim", steps=5, guidance=5.0, image_guidance=1.0, seed=12),
    "ip2p_euler_strong_image": dict(pipe="ip2p", sampler="euler", steps=4, guidance=7.5, image_guidance=2.5, seed=13),
    "ip2p_no_guidance": dict(pipe="ip2p", sampler="euler_a", steps=3, guidance=1.0, image_guidance=1.5, seed=14),
    "inpaint_euler_a": dict(pipe="inpaint", sampler="euler_a", steps=4, guidance=7.5, strength=1.0, seed=21),
    "inpaint_ddim_partial": dict(pipe="inpaint", sampler="ddim", steps=6, guidance=6.0, strength=0.7, seed=22),
    "masked_euler_a": dict(pipe="masked", sampler="euler_a", steps=4, guidance=7.5, strength=1.0, seed=31),
    "masked_ddim_partial": dict(pipe="masked", sampler="ddim", steps=6, guidance=6.0, strength=0.75, seed=32),
}

SCHEDULERS = {"euler": EulerDiscreteScheduler, "euler_a": EulerAncestralDiscreteScheduler, "ddim": DDIMScheduler}


def source_image():
    """A picture with structure everywhere: diagonal stripes over a gradient."""
    x = np.arange(SIZE)[None, :].repeat(SIZE, 0)
    y = np.arange(SIZE)[:, None].repeat(SIZE, 1)
    stripes = ((x + y) // 8) % 2
    r = x * 4
    g = 255 - y * 4
    b = 60 + 120 * stripes
    return np.stack([r, g, b], axis=-1).clip(0, 255).astype(np.uint8)


def mask_image():
    m = np.zeros((SIZE, SIZE), dtype=np.uint8)
    x0, y0, x1, y1 = MASK_BOX
    m[y0:y1, x0:x1] = 255
    return m


def make_unet(in_channels, seed):
    cfg = dict(generate.unet_config("sd15"), in_channels=in_channels)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(**cfg)
    generate.perturb_and_round(unet, seed + 1)
    unet.eval()
    return unet


def assemble(tmp, name, unet):
    """The SD 1.5 fixture folder with `unet` as its UNet."""
    model = Path(tmp) / name
    shutil.copytree(SD15, model)
    shutil.rmtree(model / "unet")
    unet.save_pretrained(model / "unet", safe_serialization=True)
    return model


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    src = source_image()
    mask = mask_image()
    tensors = {"source": torch.from_numpy(src).contiguous(), "mask": torch.from_numpy(mask).contiguous()}
    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        unets = {"ip2p": make_unet(8, 8000), "inpaint": make_unet(9, 9000)}
        for name, unet in unets.items():
            d = OUT / f"{name}_unet"
            if d.exists():
                shutil.rmtree(d)
            unet.save_pretrained(d, safe_serialization=True)
        pipes = {
            "ip2p": StableDiffusionInstructPix2PixPipeline.from_pretrained(
                assemble(tmp, "ip2p", unets["ip2p"]), safety_checker=None, requires_safety_checker=False
            ),
            "inpaint": StableDiffusionInpaintPipeline.from_pretrained(
                assemble(tmp, "inpaint", unets["inpaint"]), safety_checker=None, requires_safety_checker=False
            ),
            "masked": StableDiffusionInpaintPipeline.from_pretrained(
                SD15, safety_checker=None, requires_safety_checker=False
            ),
        }
        for p in pipes.values():
            p.set_progress_bar_config(disable=True)
        # The InstructPix2Pix model as one file, as diffusers' from_single_file reads it back.
        ip2p_dir = Path(tmp) / "ip2p"
        single = OUT / "ip2p_single_file.safetensors"
        ckpt = generate.write_single_file(pipes["ip2p"], "sd15", ip2p_dir, single, torch.float16)
        back = StableDiffusionInstructPix2PixPipeline.from_single_file(
            str(single), config=str(ip2p_dir), safety_checker=None, local_files_only=True, torch_dtype=torch.float32
        )
        assert back.unet.config.in_channels == 8
        assert generate.state_dicts_equal(back.unet, pipes["ip2p"].unet), "single file UNet differs"
        pil_src = Image.fromarray(src, "RGB")
        pil_mask = Image.fromarray(mask, "L")
        for case, c in CASES.items():
            pipe = pipes[c["pipe"]]
            pipe.scheduler = SCHEDULERS[c["sampler"]].from_config(pipe.scheduler.config)
            out = {}
            for output_type in ["latent", "np"]:
                g = torch.Generator("cpu").manual_seed(c["seed"])
                kw = dict(
                    negative_prompt=NEGATIVE,
                    num_inference_steps=c["steps"],
                    guidance_scale=c["guidance"],
                    generator=g,
                    output_type=output_type,
                )
                with torch.no_grad():
                    if c["pipe"] == "ip2p":
                        r = pipe(prompt=INSTRUCTION, image=pil_src, image_guidance_scale=c["image_guidance"], **kw)
                    else:
                        r = pipe(
                            prompt=INPAINT_PROMPT, image=pil_src, mask_image=pil_mask, strength=c["strength"],
                            height=SIZE, width=SIZE, **kw,
                        )
                out[output_type] = r.images
            tensors[f"{case}_latents"] = out["latent"].to(torch.float32).contiguous()
            tensors[f"{case}_image"] = torch.from_numpy(np.ascontiguousarray(out["np"][0])).to(torch.float32)
            cases[case] = dict(c, scheduler=type(pipe.scheduler).__name__,
                               timesteps=[float(t) for t in pipe.scheduler.timesteps])
    save_file(tensors, str(OUT / "reference.safetensors"))
    meta = {
        "model": "crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model with unet/ replaced by ip2p_unet/ or inpaint_unet/ ('masked' cases: the SD 1.5 UNet itself)",
        "instruction": INSTRUCTION,
        "inpaint_prompt": INPAINT_PROMPT,
        "negative_prompt": NEGATIVE,
        "size": SIZE,
        "mask_box": {"x0": MASK_BOX[0], "y0": MASK_BOX[1], "x1": MASK_BOX[2], "y1": MASK_BOX[3]},
        "source": "uint8 HWC: R = 4x, G = 255 - 4y, B = 60 + 120 * (((x + y) // 8) % 2)",
        "noise": "generator=torch.Generator('cpu').manual_seed(seed) passed to the pipeline (ATEN_CPU_CAPABILITY=avx2)",
        "single_file": {"path": "ip2p_single_file.safetensors", "dtype": "float16", "n_tensors": len(ckpt)},
        "cases": cases,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
            "numpy": np.__version__,
        },
    }
    (OUT / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")
    for k, v in cases.items():
        print(k, v["scheduler"], v["timesteps"])


if __name__ == "__main__":
    main()
