#!/usr/bin/env python3
"""Stable Diffusion 3.5 parity fixtures: tiny, randomly initialised SD 3.5-shaped pipelines built
with the real diffusers / transformers classes (only the widths are shrunk), and what diffusers'
`StableDiffusion3Pipeline` computes from a seed.

Writes `crates/pictor-diffusion/tests/fixtures/diffusion/sd3/`:

* `medium/` — SD 3.5 Medium's layout: `SD3Transformer2DModel` with MMDiT-X blocks (a second,
  image-only attention in block 0: `dual_attention_layers`), RMS q/k norms, a position
  embedding table larger than the picture (cropped from its centre); CLIP-L and OpenCLIP-bigG
  with projections (`text_encoder`, `text_encoder_2`: the SDXL fixture's, CLIP-L given a text
  projection), a tiny T5 v1.1 (`text_encoder_3`, the FLUX fixture's SentencePiece tokenizer),
  the 16-channel VAE with SD3's scaling 1.5305 and shift 0.0609, the flow-match scheduler with
  shift 3.0. Classifier-free guidance 4.5 with a negative prompt, 3 steps.
* `turbo/` — SD 3.5 Large Turbo's use: plain MMDiT blocks, no guidance (1 pass per step), 2
  steps, and no T5 (`text_encoder_3=None`: diffusers feeds zeros in its place).
* `<variant>/transformer_sai.safetensors` — the transformer under Stability AI's key names
  (`joint_blocks.N.x_block.attn.qkv`…, as `sd3.5_medium.safetensors` and city96's GGUFs),
  under `model.diffusion_model.` as ComfyUI's single files, written by this script's own
  diffusers→SAI table and checked by round-tripping through diffusers' converter.
* `medium/transformer.gguf` — the same transformer as city96's converter writes SD 3.5 GGUFs
  with gguf-py (GGUF v3, Stability AI's names without prefix, `general.architecture = sd3`):
  1-D tensors float32, others Q8_0 where the row length allows (a multiple of 32), float16
  otherwise (the patch convolution and position table among them).
* `<variant>/reference.safetensors` + `reference.json` — token ids, each encoder's output, the
  joint prompt embeddings and pooled vectors (prompt and negative), the seed noise, one
  transformer evaluation, sigmas, the latents after every step, the final latents, the VAE's
  output and the picture (0..1, HWC).

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE /tmp/torchenv/bin/python tools/sd-fixtures/sd3.py
    # needs torch, diffusers, transformers, sentencepiece, protobuf; run flux.py first (its tokenizer)
"""

import os

os.environ.setdefault("ATEN_CPU_CAPABILITY", "default")
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["DIFFUSERS_NO_ADVISORY_WARNINGS"] = "1"

import json
import platform
import shutil
from pathlib import Path

import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.backends.mkldnn.enabled = False

import diffusers  # noqa: E402
import transformers  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKL,
    FlowMatchEulerDiscreteScheduler,
    SD3Transformer2DModel,
    StableDiffusion3Pipeline,
)
from diffusers.loaders.single_file_utils import convert_sd3_transformer_checkpoint_to_diffusers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (  # noqa: E402
    CLIPTextConfig,
    CLIPTextModelWithProjection,
    CLIPTokenizer,
    T5Config,
    T5EncoderModel,
    T5TokenizerFast,
)

diffusers.utils.logging.set_verbosity_error()
transformers.utils.logging.set_verbosity_error()

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion"
OUT = FIXTURES / "sd3"

PROMPT = "a photo of a red car, the astronaut!"
NEGATIVE = "low quality, ugly"
SIZE = 64
T5_LEN = 24  # max_sequence_length (the pipeline's default is 256)
SEED = 3141
VARIANTS = {
    "medium": dict(steps=3, guidance=4.5, dual=(0,), t5=True, seed=6100),
    "turbo": dict(steps=2, guidance=0.0, dual=(), t5=False, seed=6200),
}


def rounded(module, seed, scale=0.05):
    """Spread the random init so every layer matters; round to the fp16 grid (files are exact)."""
    g = torch.Generator("cpu").manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
            p.copy_(p.half().float())
    return module


def diffusers_to_sai(sd, num_layers, dual):
    """SD3Transformer2DModel state dict -> Stability AI's names (inverse of diffusers' converter)."""
    out = {}
    pop = sd.pop

    def swap(t):
        scale, shift = t.chunk(2)
        return torch.cat([shift, scale])

    out["pos_embed"] = pop("pos_embed.pos_embed")
    for s in ("weight", "bias"):
        out[f"x_embedder.proj.{s}"] = pop(f"pos_embed.proj.{s}")
        out[f"context_embedder.{s}"] = pop(f"context_embedder.{s}")
        for a, b in (("t_embedder", "timestep_embedder"), ("y_embedder", "text_embedder")):
            out[f"{a}.mlp.0.{s}"] = pop(f"time_text_embed.{b}.linear_1.{s}")
            out[f"{a}.mlp.2.{s}"] = pop(f"time_text_embed.{b}.linear_2.{s}")
        out[f"final_layer.linear.{s}"] = pop(f"proj_out.{s}")
        out[f"final_layer.adaLN_modulation.1.{s}"] = swap(pop(f"norm_out.linear.{s}"))
    for i in range(num_layers):
        j, b = f"joint_blocks.{i}", f"transformer_blocks.{i}"
        last = i == num_layers - 1
        for s in ("weight", "bias"):
            out[f"{j}.x_block.attn.qkv.{s}"] = torch.cat([pop(f"{b}.attn.to_{x}.{s}") for x in "qkv"])
            out[f"{j}.context_block.attn.qkv.{s}"] = torch.cat([pop(f"{b}.attn.add_{x}_proj.{s}") for x in "qkv"])
            out[f"{j}.x_block.attn.proj.{s}"] = pop(f"{b}.attn.to_out.0.{s}")
            out[f"{j}.x_block.adaLN_modulation.1.{s}"] = pop(f"{b}.norm1.linear.{s}")
            out[f"{j}.x_block.mlp.fc1.{s}"] = pop(f"{b}.ff.net.0.proj.{s}")
            out[f"{j}.x_block.mlp.fc2.{s}"] = pop(f"{b}.ff.net.2.{s}")
            ctx_mod = pop(f"{b}.norm1_context.linear.{s}")
            out[f"{j}.context_block.adaLN_modulation.1.{s}"] = swap(ctx_mod) if last else ctx_mod
            if not last:
                out[f"{j}.context_block.attn.proj.{s}"] = pop(f"{b}.attn.to_add_out.{s}")
                out[f"{j}.context_block.mlp.fc1.{s}"] = pop(f"{b}.ff_context.net.0.proj.{s}")
                out[f"{j}.context_block.mlp.fc2.{s}"] = pop(f"{b}.ff_context.net.2.{s}")
            if i in dual:
                out[f"{j}.x_block.attn2.qkv.{s}"] = torch.cat([pop(f"{b}.attn2.to_{x}.{s}") for x in "qkv"])
                out[f"{j}.x_block.attn2.proj.{s}"] = pop(f"{b}.attn2.to_out.0.{s}")
        for a, n in (("x_block.attn", "attn.norm_"), ("context_block.attn", "attn.norm_added_")):
            for x in "qk":
                out[f"{j}.{a}.ln_{x}.weight"] = pop(f"{b}.{n}{x}.weight")
        if i in dual:
            for x in "qk":
                out[f"{j}.x_block.attn2.ln_{x}.weight"] = pop(f"{b}.attn2.norm_{x}.weight")
    assert not sd, f"unmapped diffusers keys: {sorted(sd)}"
    return {k: v.contiguous() for k, v in out.items()}


def check_sai_roundtrip(sai, original):
    back = convert_sd3_transformer_checkpoint_to_diffusers({k: v.clone() for k, v in sai.items()})
    assert back.keys() == original.keys(), set(back) ^ set(original)
    for k in back:
        assert torch.equal(back[k], original[k]), k


def clip_l(sdxl):
    """The SDXL fixture's CLIP-L with a text projection (SD3's text_encoder has one)."""
    cfg = CLIPTextConfig.from_pretrained(sdxl / "text_encoder")
    cfg.architectures = ["CLIPTextModelWithProjection"]
    cfg.projection_dim = 32
    model = CLIPTextModelWithProjection(cfg).eval()
    from safetensors.torch import load_file

    missing = model.load_state_dict(load_file(sdxl / "text_encoder" / "model.safetensors"), strict=False)
    assert missing.missing_keys == ["text_projection.weight"] and not missing.unexpected_keys, missing
    g = torch.Generator("cpu").manual_seed(77)
    with torch.no_grad():
        w = model.text_projection.weight
        w.copy_((torch.randn(w.shape, generator=g) * 0.2).half().float())
    return model


def build(variant, spec, t5_tok_dir):
    sdxl = FIXTURES / "sdxl" / "model"
    seed = spec["seed"]
    torch.manual_seed(seed)
    t5 = None
    if spec["t5"]:
        t5 = T5EncoderModel(
            T5Config(
                vocab_size=224,
                d_model=96,
                d_kv=8,
                d_ff=48,
                num_layers=2,
                num_heads=4,
                relative_attention_num_buckets=8,
                relative_attention_max_distance=20,
                feed_forward_proj="gated-gelu",
                dropout_rate=0.0,
                is_encoder_decoder=False,
                use_cache=False,
                tie_word_embeddings=False,
            )
        ).eval()
        rounded(t5, seed + 1, 0.2)
    transformer_cfg = dict(
        sample_size=8,
        patch_size=2,
        in_channels=16,
        num_layers=2,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=96,
        caption_projection_dim=16,
        pooled_projection_dim=72,  # CLIP-L's 32 + bigG's 40
        out_channels=16,
        pos_embed_max_size=10,
        dual_attention_layers=spec["dual"],
        qk_norm="rms_norm",
    )
    transformer = rounded(SD3Transformer2DModel(**transformer_cfg).eval(), seed + 2, 0.1)
    vae = rounded(
        AutoencoderKL(
            in_channels=3,
            out_channels=3,
            down_block_types=["DownEncoderBlock2D"] * 4,
            up_block_types=["UpDecoderBlock2D"] * 4,
            block_out_channels=(4, 8, 8, 8),
            layers_per_block=1,
            norm_num_groups=2,
            latent_channels=16,
            sample_size=64,
            scaling_factor=1.5305,
            shift_factor=0.0609,
            use_quant_conv=False,
            use_post_quant_conv=False,
        ).eval(),
        seed + 3,
        0.05,
    )
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0)
    pipe = StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=scheduler,
        vae=vae,
        text_encoder=clip_l(sdxl),
        tokenizer=CLIPTokenizer.from_pretrained(sdxl / "tokenizer"),
        text_encoder_2=CLIPTextModelWithProjection.from_pretrained(sdxl / "text_encoder_2").eval(),
        tokenizer_2=CLIPTokenizer.from_pretrained(sdxl / "tokenizer_2"),
        text_encoder_3=t5,
        tokenizer_3=T5TokenizerFast.from_pretrained(t5_tok_dir) if t5 is not None else None,
    )
    return pipe, transformer_cfg


def references(pipe, spec):
    refs = {}
    cfg_on = spec["guidance"] > 1
    for name, tok in (("clip_l_ids", pipe.tokenizer), ("clip_g_ids", pipe.tokenizer_2)):
        refs[name] = torch.tensor(tok(PROMPT, padding="max_length", max_length=77, truncation=True).input_ids)
    if pipe.tokenizer_3 is not None:
        refs["t5_ids"] = torch.tensor(
            pipe.tokenizer_3(PROMPT, padding="max_length", max_length=T5_LEN, truncation=True).input_ids
        )
    with torch.no_grad():
        emb, neg, pooled, neg_pooled = pipe.encode_prompt(
            PROMPT, None, None, negative_prompt=NEGATIVE, do_classifier_free_guidance=True, max_sequence_length=T5_LEN
        )
        l_hidden, l_pooled = pipe._get_clip_prompt_embeds(PROMPT, clip_model_index=0)
        g_hidden, g_pooled = pipe._get_clip_prompt_embeds(PROMPT, clip_model_index=1)
        t5 = pipe._get_t5_prompt_embeds(PROMPT, max_sequence_length=T5_LEN)
    refs.update(
        prompt_embeds=emb,
        negative_prompt_embeds=neg,
        pooled=pooled,
        negative_pooled=neg_pooled,
        clip_l_hidden=l_hidden,
        clip_l_pooled=l_pooled,
        clip_g_hidden=g_hidden,
        clip_g_pooled=g_pooled,
        t5_embeds=t5,
    )
    latent = SIZE // pipe.vae_scale_factor
    g = torch.Generator("cpu").manual_seed(SEED)
    refs["noise"] = torch.randn((1, 16, latent, latent), generator=g, dtype=torch.float32)
    with torch.no_grad():
        refs["transformer_out"] = pipe.transformer(
            hidden_states=refs["noise"],
            timestep=torch.tensor([750.0]),
            encoder_hidden_states=emb,
            pooled_projections=pooled,
            return_dict=False,
        )[0]

    seen = []

    def cb(p, i, t, kw):
        seen.append(kw["latents"].clone())
        return kw

    common = dict(
        prompt=PROMPT,
        negative_prompt=NEGATIVE if cfg_on else None,
        height=SIZE,
        width=SIZE,
        num_inference_steps=spec["steps"],
        guidance_scale=spec["guidance"],
        max_sequence_length=T5_LEN,
        generator=torch.Generator("cpu").manual_seed(SEED),
        callback_on_step_end=cb,
    )
    with torch.no_grad():
        latents = pipe(**common, output_type="latent").images
    refs["sigmas"] = pipe.scheduler.sigmas.clone()
    refs["timesteps"] = pipe.scheduler.timesteps.clone()
    refs["latents_steps"] = torch.stack(seen)
    refs["latents"] = latents
    vae_in = latents / pipe.vae.config.scaling_factor + pipe.vae.config.shift_factor
    with torch.no_grad():
        refs["vae_decode_out"] = pipe.vae.decode(vae_in, return_dict=False)[0]
    common["generator"] = torch.Generator("cpu").manual_seed(SEED)
    with torch.no_grad():
        image = pipe(**common, output_type="np").images
    refs["image"] = torch.from_numpy(image[0].copy())
    return {k: v.contiguous().float() if v.dtype != torch.int64 else v.contiguous() for k, v in refs.items()}


def write_gguf(sai, path):
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), arch="sd3")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    kinds = {}
    for name in sorted(sai):
        t = sai[name].float().numpy()
        if t.ndim == 1:
            q, data = gguf.GGMLQuantizationType.F32, t
        elif t.ndim == 2 and t.shape[-1] % 32 == 0:
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
    print("gguf", path.name, kinds)


def main():
    t5_tok_dir = FIXTURES / "flux" / "dev" / "tokenizer_2"
    assert t5_tok_dir.is_dir(), "run flux.py first"
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for variant, spec in VARIANTS.items():
        pipe, cfg = build(variant, spec, t5_tok_dir)
        folder = OUT / variant
        pipe.save_pretrained(folder, safe_serialization=True)
        # the CLIP tokenizer folders as the hub has them (vocab.json + merges.txt)
        for tok in ("tokenizer", "tokenizer_2"):
            (folder / tok / "tokenizer.json").unlink(missing_ok=True)
            for f in ("vocab.json", "merges.txt"):
                shutil.copy(FIXTURES / "sdxl" / "model" / tok / f, folder / tok / f)
        if spec["t5"]:
            shutil.copy(t5_tok_dir / "spiece.model", folder / "tokenizer_3" / "spiece.model")
        original = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
        sai = diffusers_to_sai(dict(original), cfg["num_layers"], spec["dual"])
        check_sai_roundtrip(sai, original)
        save_file(
            {f"model.diffusion_model.{k}": v for k, v in sai.items()},
            folder / "transformer_sai.safetensors",
            metadata={"format": "pt"},
        )
        if variant == "medium":
            write_gguf(sai, folder / "transformer.gguf")
        refs = references(pipe, spec)
        save_file(refs, folder / "reference.safetensors", metadata={"format": "pt"})
        meta = {
            "prompt": PROMPT,
            "negative_prompt": NEGATIVE,
            "size": SIZE,
            "seed": SEED,
            "steps": spec["steps"],
            "guidance": spec["guidance"],
            "max_sequence_length": T5_LEN,
            "t5": spec["t5"],
            "tensors": {k: list(v.shape) for k, v in sorted(refs.items())},
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "diffusers": diffusers.__version__,
                "transformers": transformers.__version__,
                "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
                "MKL_CBWR": os.environ.get("MKL_CBWR"),
            },
        }
        (folder / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(variant, {k: tuple(v.shape) for k, v in refs.items()}, "max|latents|", float(refs["latents"].abs().max()))


if __name__ == "__main__":
    main()
