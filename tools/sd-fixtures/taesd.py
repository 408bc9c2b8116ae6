"""Tiny-autoencoder (TAESD, diffusers AutoencoderTiny) parity fixture for Pictor's tiny decoder.

A randomly initialised AutoencoderTiny with the real layer structure (4 decoder levels of
3, 3, 3, 1 blocks, nearest upsampling, tanh latent clamp) but 8 channels instead of 64, saved
as a TAESD folder, and its decoder's outputs for (a) random latents spread wide enough to
exercise the clamp and (b) the SD 1.5 fixture's 4-step Euler latents, as the SD pipeline
decodes them (divided by the tiny VAE's scaling_factor, 1.0). Run by hand (versions recorded):

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE /tmp/sdref/bin/python tools/sd-fixtures/taesd.py
"""
import json
import os
import pathlib

import diffusers
import torch
from diffusers import AutoencoderTiny
from safetensors.torch import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "crates/pictor-diffusion/tests/fixtures/diffusion/taesd"

torch.manual_seed(2024)
vae = AutoencoderTiny(
    in_channels=3,
    out_channels=3,
    encoder_block_out_channels=(8, 8, 8, 8),
    decoder_block_out_channels=(8, 8, 8, 8),
    num_encoder_blocks=(1, 3, 3, 3),
    num_decoder_blocks=(3, 3, 3, 1),
    latent_channels=4,
    upsampling_scaling_factor=2,
    act_fn="relu",
).eval()
with torch.no_grad():  # spread the weights so every layer matters
    for p in vae.parameters():
        p.add_(torch.randn_like(p) * 0.05)
vae.save_pretrained(OUT / "model", safe_serialization=True)

g = torch.Generator("cpu").manual_seed(7)
latents = torch.randn(1, 4, 8, 8, generator=g) * 4.0
sd15 = load_file(ROOT / "crates/pictor-diffusion/tests/fixtures/diffusion/sd15/reference.safetensors")
with torch.no_grad():
    decoded = vae.decode(latents, return_dict=False)[0]
    euler = vae.decode(sd15["latents_euler"] / vae.config.scaling_factor, return_dict=False)[0]
save_file(
    {"latents": latents.contiguous(), "decoded": decoded.contiguous(), "sd15_euler_decoded": euler.contiguous()},
    OUT / "reference.safetensors",
    metadata={"format": "pt"},
)
(OUT / "reference.json").write_text(
    json.dumps(
        {
            "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__},
            "env": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")},
            "scaling_factor": vae.config.scaling_factor,
            "tensors": {"latents": "randn(seed 7) * 4", "decoded": "vae.decode(latents)",
                        "sd15_euler_decoded": "vae.decode(sd15 latents_euler / scaling_factor)"},
        },
        indent=1,
    )
    + "\n"
)
print("wrote", OUT, decoded.shape, float(decoded.abs().max()))
