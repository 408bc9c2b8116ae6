#!/usr/bin/env python3
"""Reference pictures for every sampler and noise source Pictor offers, made by the diffusers
pipeline itself on the committed tiny SD 1.5 model (`crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model`).

The model's scheduler configuration is replaced by Stable Diffusion 1.5's own
(`PNDMScheduler`, no `timestep_spacing` key, `set_alpha_to_one: false`), written to
`crates/pictor-diffusion/tests/fixtures/diffusion/samplers/scheduler_config.json`; every sampler is
`Class.from_config(that)`, as a diffusers user switches samplers, so each class applies its own
defaults (DDIM "leading", the others "linspace").

Noise:
* torch-cpu: `generator=torch.Generator("cpu").manual_seed(seed)` passed to the pipeline (initial
  latents and every ancestral step's noise from that one generator). Run on an x86-64 CPU with
  AVX2 (torch's default kernels, not ATEN_CPU_CAPABILITY=default): that is the kernel Pictor's
  `torch-cpu` reproduces bit for bit.
* a1111-gpu: the initial latents are AUTOMATIC1111's `rng_philox.Generator(seed).randn(...)`
  (offset 0) and each ancestral step's noise the next draw of that generator (`randn_tensor`
  patched in the Euler-ancestral module). Pass A1111's `modules/rng_philox.py` with --philox (it is
  AGPL and not part of Pictor).

Writes crates/pictor-diffusion/tests/fixtures/diffusion/samplers/{reference.safetensors,reference.json}: for each case the
final latents (`<case>_latents`) and the picture (`<case>_image`, float 0..1, HWC); and
`a1111_dpmpp_2m_karras.png`, the DPM++ 2M Karras / GPU-noise picture as a PNG carrying the
`parameters` text AUTOMATIC1111 writes for those settings (the README's reproduction example).

    python tools/sd-fixtures/samplers.py --philox /path/to/rng_philox.py
"""

import os

os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["DIFFUSERS_NO_ADVISORY_WARNINGS"] = "1"

import argparse
import importlib.util
import json
import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import diffusers  # noqa: E402
from diffusers import (  # noqa: E402
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    HeunDiscreteScheduler,
    LMSDiscreteScheduler,
    StableDiffusionPipeline,
)
from safetensors.torch import save_file  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model"
OUT = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion/samplers"

PROMPT = "a photo of a red car, the astronaut!"
NEGATIVE = "blurry"
SIZE = 64
STEPS = 8
GUIDANCE = 7.5
SEED = 31337

# Stable Diffusion 1.5's scheduler_config.json (runwayml/stable-diffusion-v1-5).
SD15_SCHEDULER = {
    "_class_name": "PNDMScheduler",
    "_diffusers_version": "0.6.0",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "trained_betas": None,
    "clip_sample": False,
}

# case -> (Pictor sampler id, class, extra config, karras flag for Pictor's CLI, noise)
CASES = {
    "euler": ("euler", EulerDiscreteScheduler, {}, None, "torch-cpu"),
    "euler_a": ("euler_a", EulerAncestralDiscreteScheduler, {}, None, "torch-cpu"),
    "ddim": ("ddim", DDIMScheduler, {}, None, "torch-cpu"),
    "dpmpp_2m": ("dpm++_2m", DPMSolverMultistepScheduler, {}, False, "torch-cpu"),
    "dpmpp_2m_karras": ("dpm++_2m", DPMSolverMultistepScheduler, {"use_karras_sigmas": True}, True, "torch-cpu"),
    "heun": ("heun", HeunDiscreteScheduler, {}, None, "torch-cpu"),
    "lms": ("lms", LMSDiscreteScheduler, {}, None, "torch-cpu"),
    "lms_karras": ("lms", LMSDiscreteScheduler, {"use_karras_sigmas": True}, True, "torch-cpu"),
    "euler_a_nv": ("euler_a", EulerAncestralDiscreteScheduler, {}, None, "a1111-gpu"),
    "dpmpp_2m_karras_nv": ("dpm++_2m", DPMSolverMultistepScheduler, {"use_karras_sigmas": True}, True, "a1111-gpu"),
}


class patched:
    def __init__(self, module, name, value):
        self.module, self.name, self.value = module, name, value

    def __enter__(self):
        self.old = getattr(self.module, self.name)
        setattr(self.module, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.old)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--philox", required=True, help="AUTOMATIC1111's modules/rng_philox.py")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("rng_philox", args.philox)
    philox = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(philox)

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scheduler_config.json").write_text(json.dumps(SD15_SCHEDULER, indent=2) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model"
        shutil.copytree(MODEL, model)
        shutil.copy(OUT / "scheduler_config.json", model / "scheduler/scheduler_config.json")
        pipe = StableDiffusionPipeline.from_pretrained(model, safety_checker=None, requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    base = dict(pipe.scheduler.config)

    import diffusers.schedulers.scheduling_euler_ancestral_discrete as ea_mod

    tensors, cases = {}, {}
    shape = (1, 4, SIZE // 8, SIZE // 8)
    for case, (sampler, cls, extra, karras, noise) in CASES.items():
        pipe.scheduler = cls.from_config(base, **extra)
        kwargs = dict(
            prompt=PROMPT,
            negative_prompt=NEGATIVE,
            height=SIZE,
            width=SIZE,
            num_inference_steps=STEPS,
            guidance_scale=GUIDANCE,
        )
        out = {}
        for output_type in ["latent", "np"]:
            if noise == "torch-cpu":
                kw = dict(kwargs, generator=torch.Generator("cpu").manual_seed(SEED))
                with torch.no_grad():
                    r = pipe(**kw, output_type=output_type).images
            else:
                g = philox.Generator(SEED)
                latents = torch.from_numpy(g.randn(shape))

                def step_noise(shape, generator=None, device=None, dtype=None, layout=None):
                    return torch.from_numpy(g.randn(tuple(shape))).to(dtype or torch.float32)

                with patched(ea_mod, "randn_tensor", step_noise), torch.no_grad():
                    r = pipe(**kwargs, latents=latents, output_type=output_type).images
            out[output_type] = r
        tensors[f"{case}_latents"] = out["latent"].to(torch.float32).contiguous()
        tensors[f"{case}_image"] = torch.from_numpy(np.ascontiguousarray(out["np"][0])).to(torch.float32)
        cases[case] = {
            "sampler": sampler,
            "karras": karras,
            "noise": noise,
            "scheduler": type(pipe.scheduler).__name__,
            "scheduler_overrides": extra,
            "timesteps": [float(x) for x in pipe.scheduler.timesteps],
        }
    save_file(tensors, str(OUT / "reference.safetensors"))

    # The GPU-noise DPM++ 2M Karras picture as A1111 would save it (A1111 leaves RNG out for its
    # default GPU noise; "Model" is the checkpoint's file name without extension).
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text(
        "parameters",
        f"{PROMPT}\nNegative prompt: {NEGATIVE}\nSteps: {STEPS}, Sampler: DPM++ 2M, Schedule type: Karras, "
        f"CFG scale: {GUIDANCE}, Seed: {SEED}, Size: {SIZE}x{SIZE}, Model: model, Version: v1.10.1",
    )
    pixels = (tensors["dpmpp_2m_karras_nv_image"].numpy() * 255).round().astype("uint8")
    Image.fromarray(pixels).save(OUT / "a1111_dpmpp_2m_karras.png", pnginfo=info)
    meta = {
        "model": "crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model with scheduler/scheduler_config.json replaced by scheduler_config.json here",
        "prompt": PROMPT,
        "negative_prompt": NEGATIVE,
        "size": SIZE,
        "steps": STEPS,
        "guidance": GUIDANCE,
        "seed": SEED,
        "cases": cases,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
            "numpy": np.__version__,
            "a1111": "stable-diffusion-webui v1.10.1 modules/rng_philox.py",
        },
    }
    (OUT / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")
    for k, v in cases.items():
        print(k, v["timesteps"])


if __name__ == "__main__":
    main()
