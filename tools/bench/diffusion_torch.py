"""The torch side of `cargo bench --bench diffusion`: one case per process, same architectures
(tools/bench/sd_architectures.json), random weights, 2 threads, f32, diffusers' defaults
(PyTorch SDPA attention). Prints one JSON line: {"case", "seconds": [...], "peak_rss"}.

    PICTOR_DIFFUSION_BENCH_CASE=sd21:unet:512:f32 python tools/bench/diffusion_torch.py
"""
import json
import os
import resource
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(2)
torch.set_grad_enabled(False)

from diffusers import AutoencoderKL, UNet2DConditionModel  # noqa: E402
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection  # noqa: E402

ARCH = json.loads((Path(__file__).parent / "sd_architectures.json").read_text())


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    case = os.environ.get("PICTOR_DIFFUSION_BENCH_CASE") or sys.argv[1]
    arch, part, side, variant = case.split(":")
    side = int(side)
    times = []
    if part == "unet":
        cfg = dict(ARCH[arch]["unet"])
        unet = UNet2DConditionModel(**cfg).eval()
        batch = 2 if variant.endswith("cfg") else 1  # the guidance batch, as the Rust side
        x = torch.randn(batch, 4, side // 8, side // 8)
        ctx = torch.randn(batch, 77, cfg["cross_attention_dim"])
        added = None
        if arch == "sdxl":
            added = {"text_embeds": torch.randn(1, 1280), "time_ids": torch.tensor([[side, side, 0, 0, side, side]], dtype=torch.float32)}
        for _ in range(2):
            t = time.perf_counter()
            out = unet(x, 999, encoder_hidden_states=ctx, added_cond_kwargs=added, return_dict=False)[0]
            float(out.sum())
            times.append(time.perf_counter() - t)
    elif part == "vae":
        cfg = {k: v for k, v in ARCH["vae"].items() if k != "scaling_factor"}
        vae = AutoencoderKL(**cfg).eval()
        if variant.endswith("tiled"):
            vae.enable_tiling()
        z = torch.randn(1, 4, side // 8, side // 8)
        t = time.perf_counter()
        out = vae.decode(z, return_dict=False)[0]
        float(out.sum())
        times.append(time.perf_counter() - t)
    elif part == "taesd":
        from diffusers import AutoencoderTiny
        tiny = AutoencoderTiny().eval()
        z = torch.randn(1, 4, side // 8, side // 8)
        for _ in range(2):
            t = time.perf_counter()
            float(tiny.decode(z, return_dict=False)[0].sum())
            times.append(time.perf_counter() - t)
    elif part == "turbo":
        from diffusers import AutoencoderTiny
        c = ARCH[arch]["text_encoders"][0]
        text = CLIPTextModel(CLIPTextConfig(**{k: v for k, v in c.items() if k != "architectures"})).eval()
        unet = UNet2DConditionModel(**ARCH[arch]["unet"]).eval()
        tiny = AutoencoderTiny().eval()
        ids = torch.full((1, 77), 49406, dtype=torch.long)
        x = torch.randn(1, 4, side // 8, side // 8)
        for _ in range(2):
            t = time.perf_counter()
            ctx = text(ids).last_hidden_state
            eps = unet(x, 999, encoder_hidden_states=ctx, return_dict=False)[0]
            float(tiny.decode(x - eps, return_dict=False)[0].sum())
            times.append(time.perf_counter() - t)
    elif part == "picture20":
        # As the Rust side: both prompts encoded, 20 UNet steps on the guidance batch, the VAE.
        c = ARCH[arch]["text_encoders"][0]
        text = CLIPTextModel(CLIPTextConfig(**{k: v for k, v in c.items() if k != "architectures"})).eval()
        unet = UNet2DConditionModel(**ARCH[arch]["unet"]).eval()
        vae = AutoencoderKL(**{k: v for k, v in ARCH["vae"].items() if k != "scaling_factor"}).eval()
        ids = torch.full((1, 77), 49406, dtype=torch.long)
        x = torch.randn(1, 4, side // 8, side // 8)
        t = time.perf_counter()
        cond = text(ids).last_hidden_state
        uncond = text(ids).last_hidden_state
        ctx = torch.cat([uncond, cond])
        for step in range(20):
            eps = unet(torch.cat([x, x]), 999 - 50 * step, encoder_hidden_states=ctx, return_dict=False)[0]
            e_u, e_c = eps.chunk(2)
            x = x - 0.05 * (e_u + 7.5 * (e_c - e_u))
        float(vae.decode(x, return_dict=False)[0].sum())
        times.append(time.perf_counter() - t)
    elif part == "text":
        encoders = []
        for c in ARCH[arch]["text_encoders"]:
            proj = c["architectures"][0] == "CLIPTextModelWithProjection"
            cfg = CLIPTextConfig(**{k: v for k, v in c.items() if k != "architectures"})
            encoders.append((CLIPTextModelWithProjection if proj else CLIPTextModel)(cfg).eval())
        ids = torch.full((1, 77), 49406, dtype=torch.long)
        for _ in range(2):
            t = time.perf_counter()
            for e in encoders:
                out = e(ids, output_hidden_states=True)
                float(out.hidden_states[-2].sum())
            times.append(time.perf_counter() - t)
    elif part == "step" and arch == "sd35m":
        # One evaluation of SD 3.5 Medium's MMDiT at `side`² with 77 CLIP + 256 T5 tokens.
        from diffusers import SD3Transformer2DModel
        m = SD3Transformer2DModel(
            sample_size=128, patch_size=2, in_channels=16, num_layers=24, attention_head_dim=64,
            num_attention_heads=24, joint_attention_dim=4096, caption_projection_dim=1536,
            pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=384,
            dual_attention_layers=tuple(range(13)), qk_norm="rms_norm",
        ).eval()
        x = torch.randn(1, 16, side // 8, side // 8)
        ctx = torch.randn(1, 333, 4096)
        pooled = torch.randn(1, 2048)
        for _ in range(2):
            t = time.perf_counter()
            out = m(hidden_states=x, timestep=torch.tensor([999.0]), encoder_hidden_states=ctx,
                    pooled_projections=pooled, return_dict=False)[0]
            float(out.sum())
            times.append(time.perf_counter() - t)
    else:
        raise SystemExit(f"unknown part {part}")
    import diffusers
    print(json.dumps({"case": case, "seconds": times, "peak_rss": peak_rss(),
                      "engine": f"torch {torch.__version__}, diffusers {diffusers.__version__}"}))


if __name__ == "__main__":
    main()
