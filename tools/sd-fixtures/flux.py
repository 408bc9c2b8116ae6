#!/usr/bin/env python3
"""FLUX.1 parity fixtures: tiny, randomly initialised FLUX.1-dev- and FLUX.1-schnell-shaped
pipelines built with the real diffusers / transformers classes (only the widths are shrunk), and
what diffusers' `FluxPipeline` computes from a seed.

Writes `crates/pictor-diffusion/tests/fixtures/diffusion/flux/`:

* `t5_tokenizer/` — a SentencePiece unigram model (`spiece.model`, nmt_nfkc normalisation as
  T5's) trained on a small English corpus, converted by transformers to the `tokenizer.json`
  that FLUX's `tokenizer_2` folder carries (Precompiled normaliser, Metaspace, `</s>` appended,
  100 `<extra_id_N>` tokens), and `tokenizer_cases.json`: the ids `T5TokenizerFast` gives for
  prompts that exercise normalisation (NFKC, odd spaces, accents), unknown pieces and truncation.
* `dev/` and `schnell/` — the diffusers folders (`model_index.json`, `scheduler/`,
  `text_encoder/` = the SD 1.5 fixture's CLIP text model, `tokenizer/`, `text_encoder_2/` =
  a tiny `T5EncoderModel` (T5 v1.1: gated GELU, relative position buckets), `tokenizer_2/`,
  `transformer/` = `FluxTransformer2DModel` (1 double + 2 single blocks, 2 heads of 8,
  rope axes (2, 2, 4)), `vae/` = a 16-channel `AutoencoderKL` without quant convs, with
  FLUX's scaling 0.3611 and shift 0.1159). dev has the guidance embedder and dynamic shifting,
  schnell neither (shift 1.0), as the real models' configs.
* `<variant>/transformer_bfl.safetensors` — the same transformer under Black Forest Labs' key
  names (what ComfyUI's `flux1-*.safetensors` files and city96's GGUFs use; `qkv` fused,
  `adaLN_modulation` as shift, scale), written by this script's own diffusers→BFL table (the
  inverse of diffusers' `convert_flux_transformer_checkpoint_to_diffusers`, checked by
  round-tripping through it).
* `<variant>/reference.safetensors` + `reference.json` — token ids, CLIP pooled and T5
  embeddings, the raw seed noise, one transformer evaluation, sigmas, the latents after every
  step, the final latents and the picture (0..1, HWC).

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE /tmp/torchenv/bin/python tools/sd-fixtures/flux.py
    # needs torch, diffusers, transformers, sentencepiece, protobuf
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
import tempfile
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.backends.mkldnn.enabled = False

import diffusers  # noqa: E402
import sentencepiece as spm  # noqa: E402
import transformers  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKL,
    FlowMatchEulerDiscreteScheduler,
    FluxPipeline,
    FluxTransformer2DModel,
)
from diffusers.loaders.single_file_utils import convert_flux_transformer_checkpoint_to_diffusers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from sentencepiece import sentencepiece_model_pb2 as sp_pb2  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors  # noqa: E402
from tokenizers.models import Unigram  # noqa: E402
from transformers import CLIPTextModel, CLIPTokenizer, T5Config, T5EncoderModel, T5TokenizerFast  # noqa: E402

diffusers.utils.logging.set_verbosity_error()
transformers.utils.logging.set_verbosity_error()

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "crates/pictor-diffusion/tests/fixtures/diffusion"
OUT = FIXTURES / "flux"

PROMPT = "a photo of a red car, the astronaut!"
SIZE = 64
T5_LEN = 24  # max_sequence_length (the real models use 256 for schnell, 512 for dev)
SEED = 2718
STEPS = {"dev": 3, "schnell": 2}
GUIDANCE = 3.5

CORPUS = [
    "a photo of a red car, the astronaut!",
    "a portrait of an astronaut riding a horse on mars, highly detailed digital painting",
    "trending on artstation, sharp focus, studio lighting, cinematic, beautiful landscape",
    "with mountains and a lake at sunset, oil painting, a cute cat sitting in a garden",
    "watercolor, city street at night, neon lights, rain, masterpiece, best quality",
    "low quality, worst quality, ugly, deformed, it's the cat's toy, naive cafe",
    "a red car parked in the street, the photo of the cat, photograph, photorealistic, dog",
    "the quick brown fox jumps over the lazy dog while the moon rises above the hills",
    "an old lighthouse on a cliff, stormy sea, dramatic clouds, golden hour, 35mm film",
] * 20

TOKENIZER_CASES = [
    PROMPT,
    "A PHOTO of a Red CAR, THE Astronaut",
    "naïve café, Ünïcödé Straße ﬁne ① ＦＵＬＬ width 🚀 日本",
    "   a   photo\tof \n\n a    cat   ",
    "it's the astronaut's car; isn't it? (masterpiece:1.2) [cat] {dog} <tag>",
    "1234 cats, 56.7% of 2024 and 0.5x",
    "<extra_id_3> and </s> and <pad> typed in a prompt",
    " ".join(("the astronaut painted a red car in the city street at night " * 4).split()),
    "",
]


def rounded(module, seed, scale=0.05):
    """Spread the random init so every layer matters; round to the fp16 grid (files are exact)."""
    g = torch.Generator("cpu").manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
            p.copy_(p.half().float())
    return module


def build_t5_tokenizer(out):
    work = Path(tempfile.mkdtemp())
    (work / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    spm.SentencePieceTrainer.train(
        input=str(work / "corpus.txt"),
        model_prefix=str(work / "spiece"),
        model_type="unigram",
        vocab_size=120,
        minloglevel=2,
        character_coverage=1.0,
        normalization_rule_name="nmt_nfkc",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        pad_piece="<pad>",
        eos_piece="</s>",
        unk_piece="<unk>",
        seed_sentencepiece_size=10000,
        num_threads=1,
    )
    # tokenizer.json laid out as google/t5-v1_1-xxl's (FLUX's tokenizer_2): the SentencePiece
    # model's pieces and scores, then <extra_id_99> .. <extra_id_0>; its precompiled nmt_nfkc
    # charsmap, runs of spaces folded; Metaspace; "</s>" appended.
    proto = sp_pb2.ModelProto()
    proto.ParseFromString((work / "spiece.model").read_bytes())
    vocab = [(p.piece, p.score) for p in proto.pieces] + [(f"<extra_id_{i}>", 0.0) for i in range(99, -1, -1)]
    t = Tokenizer(Unigram(vocab, unk_id=2, byte_fallback=False))
    t.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.post_processor = processors.TemplateProcessing(
        single=["$A", "</s>"], pair=["$A", "</s>", "$B", "</s>"], special_tokens=[("</s>", 1)]
    )
    t.add_special_tokens(
        [AddedToken(x, special=True, normalized=False) for x in ("<pad>", "</s>", "<unk>")]
        + [AddedToken(f"<extra_id_{i}>", special=True, normalized=False) for i in range(100)]
    )
    out.mkdir(parents=True, exist_ok=True)
    tok = T5TokenizerFast(tokenizer_object=t, eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                          extra_ids=100, model_max_length=T5_LEN)
    tok.save_pretrained(out)
    shutil.copy(work / "spiece.model", out / "spiece.model")
    # the pieces must be SentencePiece's own (the real T5 tokenizer is the spm model); only where
    # the text has no trailing spaces: there the fast tokenizer (what diffusers runs, so the
    # reference) emits one more "\u2581" than SentencePiece, as the real T5 tokenizer.json does
    sp = spm.SentencePieceProcessor(model_file=str(work / "spiece.model"))
    for text in TOKENIZER_CASES[:3]:
        assert tok(text).input_ids == sp.encode(text) + [1], (text, tok(text).input_ids, sp.encode(text))
    return T5TokenizerFast.from_pretrained(out)


def diffusers_to_bfl(sd, cfg):
    """FluxTransformer2DModel state dict -> BFL names (inverse of diffusers' converter)."""
    out = {}
    pop = sd.pop

    def mlp(dst, src):
        out[f"{dst}.in_layer.weight"] = pop(f"{src}.linear_1.weight")
        out[f"{dst}.in_layer.bias"] = pop(f"{src}.linear_1.bias")
        out[f"{dst}.out_layer.weight"] = pop(f"{src}.linear_2.weight")
        out[f"{dst}.out_layer.bias"] = pop(f"{src}.linear_2.bias")

    mlp("time_in", "time_text_embed.timestep_embedder")
    mlp("vector_in", "time_text_embed.text_embedder")
    if cfg["guidance_embeds"]:
        mlp("guidance_in", "time_text_embed.guidance_embedder")
    for a, b in (("txt_in", "context_embedder"), ("img_in", "x_embedder"), ("final_layer.linear", "proj_out")):
        out[f"{a}.weight"] = pop(f"{b}.weight")
        out[f"{a}.bias"] = pop(f"{b}.bias")
    for i in range(cfg["num_layers"]):
        d, b = f"double_blocks.{i}", f"transformer_blocks.{i}"
        for s in ("weight", "bias"):
            out[f"{d}.img_mod.lin.{s}"] = pop(f"{b}.norm1.linear.{s}")
            out[f"{d}.txt_mod.lin.{s}"] = pop(f"{b}.norm1_context.linear.{s}")
            out[f"{d}.img_attn.qkv.{s}"] = torch.cat([pop(f"{b}.attn.to_{x}.{s}") for x in "qkv"])
            out[f"{d}.txt_attn.qkv.{s}"] = torch.cat([pop(f"{b}.attn.add_{x}_proj.{s}") for x in "qkv"])
            out[f"{d}.img_mlp.0.{s}"] = pop(f"{b}.ff.net.0.proj.{s}")
            out[f"{d}.img_mlp.2.{s}"] = pop(f"{b}.ff.net.2.{s}")
            out[f"{d}.txt_mlp.0.{s}"] = pop(f"{b}.ff_context.net.0.proj.{s}")
            out[f"{d}.txt_mlp.2.{s}"] = pop(f"{b}.ff_context.net.2.{s}")
            out[f"{d}.img_attn.proj.{s}"] = pop(f"{b}.attn.to_out.0.{s}")
            out[f"{d}.txt_attn.proj.{s}"] = pop(f"{b}.attn.to_add_out.{s}")
        out[f"{d}.img_attn.norm.query_norm.scale"] = pop(f"{b}.attn.norm_q.weight")
        out[f"{d}.img_attn.norm.key_norm.scale"] = pop(f"{b}.attn.norm_k.weight")
        out[f"{d}.txt_attn.norm.query_norm.scale"] = pop(f"{b}.attn.norm_added_q.weight")
        out[f"{d}.txt_attn.norm.key_norm.scale"] = pop(f"{b}.attn.norm_added_k.weight")
    for i in range(cfg["num_single_layers"]):
        d, b = f"single_blocks.{i}", f"single_transformer_blocks.{i}"
        for s in ("weight", "bias"):
            out[f"{d}.modulation.lin.{s}"] = pop(f"{b}.norm.linear.{s}")
            out[f"{d}.linear1.{s}"] = torch.cat([pop(f"{b}.attn.to_{x}.{s}") for x in "qkv"] + [pop(f"{b}.proj_mlp.{s}")])
            out[f"{d}.linear2.{s}"] = pop(f"{b}.proj_out.{s}")
        out[f"{d}.norm.query_norm.scale"] = pop(f"{b}.attn.norm_q.weight")
        out[f"{d}.norm.key_norm.scale"] = pop(f"{b}.attn.norm_k.weight")
    for s in ("weight", "bias"):
        scale, shift = pop(f"norm_out.linear.{s}").chunk(2)
        out[f"final_layer.adaLN_modulation.1.{s}"] = torch.cat([shift, scale])
    assert not sd, f"unmapped diffusers keys: {sorted(sd)}"
    return {k: v.contiguous() for k, v in out.items()}


def to_diffusers(bfl, inner):
    """diffusers' own BFL -> diffusers converter. It hard-codes FLUX's width (3072) for the
    single blocks' split, so the split is patched to this model's width."""
    real_split = torch.split

    def split(t, sizes, dim=0):
        if isinstance(sizes, tuple) and sizes[0] == 3072:
            sizes = (inner, inner, inner, 4 * inner)
        return real_split(t, sizes, dim)

    torch.split = split
    try:
        return convert_flux_transformer_checkpoint_to_diffusers({k: v.clone() for k, v in bfl.items()})
    finally:
        torch.split = real_split


def check_bfl_roundtrip(bfl, original, cfg):
    """diffusers' own converter must give the diffusers state dict back."""
    back = to_diffusers(bfl, cfg["num_attention_heads"] * cfg["attention_head_dim"])
    assert back.keys() == original.keys(), set(back) ^ set(original)
    for k in back:
        assert torch.equal(back[k], original[k]), k


def build(variant, clip_dir, t5_tok_dir):
    dev = variant == "dev"
    seed = 5100 if dev else 5200
    torch.manual_seed(seed)
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=224,  # 120 pieces + 100 extra ids, padded (the real T5 pads its 32100 to 32128)
            d_model=32,
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
        patch_size=1,
        in_channels=64,
        out_channels=None,
        num_layers=1,
        num_single_layers=2,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=dev,
        axes_dims_rope=(2, 2, 4),
    )
    transformer = rounded(FluxTransformer2DModel(**transformer_cfg).eval(), seed + 2, 0.1)
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
            scaling_factor=0.3611,
            shift_factor=0.1159,
            use_quant_conv=False,
            use_post_quant_conv=False,
        ).eval(),
        seed + 3,
        0.05,
    )
    if dev:
        scheduler = FlowMatchEulerDiscreteScheduler(
            num_train_timesteps=1000,
            shift=3.0,
            use_dynamic_shifting=True,
            base_shift=0.5,
            max_shift=1.15,
            base_image_seq_len=256,
            max_image_seq_len=4096,
        )
    else:
        scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=False)
    pipe = FluxPipeline(
        scheduler=scheduler,
        vae=vae,
        text_encoder=CLIPTextModel.from_pretrained(clip_dir / "text_encoder").eval(),
        tokenizer=CLIPTokenizer.from_pretrained(clip_dir / "tokenizer"),
        text_encoder_2=t5,
        tokenizer_2=T5TokenizerFast.from_pretrained(t5_tok_dir),
        transformer=transformer,
    )
    return pipe, transformer_cfg


def references(pipe, variant, cfg):
    dev = variant == "dev"
    refs = {}
    steps = STEPS[variant]
    tok, tok2 = pipe.tokenizer, pipe.tokenizer_2
    refs["clip_ids"] = torch.tensor(
        tok(PROMPT, padding="max_length", max_length=77, truncation=True).input_ids, dtype=torch.int64
    )
    refs["t5_ids"] = torch.tensor(
        tok2(PROMPT, padding="max_length", max_length=T5_LEN, truncation=True).input_ids, dtype=torch.int64
    )
    with torch.no_grad():
        embeds, pooled, text_ids = pipe.encode_prompt(PROMPT, None, max_sequence_length=T5_LEN)
    refs["t5_embeds"], refs["pooled"] = embeds, pooled

    g = torch.Generator("cpu").manual_seed(SEED)
    latent = 2 * (SIZE // (pipe.vae_scale_factor * 2))
    noise = torch.randn((1, 16, latent, latent), generator=g, dtype=torch.float32)
    refs["noise"] = noise
    packed = FluxPipeline._pack_latents(noise, 1, 16, latent, latent)
    refs["noise_packed"] = packed
    img_ids = FluxPipeline._prepare_latent_image_ids(1, latent // 2, latent // 2, "cpu", torch.float32)
    refs["img_ids"] = img_ids

    guidance = torch.full([1], GUIDANCE) if dev else None
    with torch.no_grad():
        out = pipe.transformer(
            hidden_states=packed,
            timestep=torch.tensor([0.75]),
            guidance=guidance,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            txt_ids=text_ids,
            img_ids=img_ids,
            return_dict=False,
        )[0]
    refs["transformer_out"] = out

    seen = []

    def cb(p, i, t, kw):
        seen.append(kw["latents"].clone())
        return kw

    common = dict(
        prompt=PROMPT,
        height=SIZE,
        width=SIZE,
        num_inference_steps=steps,
        guidance_scale=GUIDANCE,
        max_sequence_length=T5_LEN,
        generator=torch.Generator("cpu").manual_seed(SEED),
        callback_on_step_end=cb,
    )
    with torch.no_grad():
        latents = pipe(**common, output_type="latent").images
    refs["sigmas"] = pipe.scheduler.sigmas.clone()
    refs["timesteps"] = pipe.scheduler.timesteps.clone()
    refs["latents_steps"] = torch.stack(seen)
    refs["latents_packed"] = latents
    unpacked = FluxPipeline._unpack_latents(latents, SIZE, SIZE, pipe.vae_scale_factor)
    refs["latents"] = unpacked
    vae_in = unpacked / pipe.vae.config.scaling_factor + pipe.vae.config.shift_factor
    with torch.no_grad():
        refs["vae_decode_out"] = pipe.vae.decode(vae_in, return_dict=False)[0]
    seen.clear()
    common["generator"] = torch.Generator("cpu").manual_seed(SEED)
    with torch.no_grad():
        image = pipe(**common, output_type="np").images
    refs["image"] = torch.from_numpy(image[0].copy())
    return {k: v.contiguous().float() if v.dtype != torch.int64 else v.contiguous() for k, v in refs.items()}


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    t5_tok_dir = OUT / "t5_tokenizer"
    tok = build_t5_tokenizer(t5_tok_dir)
    cases = []
    for text in TOKENIZER_CASES:
        cases.append(
            {
                "text": text,
                "ids": tok(text, padding="max_length", max_length=T5_LEN, truncation=True).input_ids,
                "full": tok(text).input_ids,
            }
        )
    (t5_tok_dir / "tokenizer_cases.json").write_text(json.dumps({"max_length": T5_LEN, "cases": cases}, ensure_ascii=False, indent=1) + "\n")

    clip_dir = FIXTURES / "sd15" / "model"
    for variant in ("dev", "schnell"):
        pipe, cfg = build(variant, clip_dir, t5_tok_dir)
        folder = OUT / variant
        pipe.save_pretrained(folder, safe_serialization=True)
        # the tokenizer_2 folder as the FLUX repos ship it (tokenizer.json + spiece.model)
        shutil.copy(t5_tok_dir / "spiece.model", folder / "tokenizer_2" / "spiece.model")
        (folder / "tokenizer" / "tokenizer.json").unlink(missing_ok=True)
        shutil.copy(clip_dir / "tokenizer" / "vocab.json", folder / "tokenizer" / "vocab.json")
        shutil.copy(clip_dir / "tokenizer" / "merges.txt", folder / "tokenizer" / "merges.txt")
        original = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
        bfl = diffusers_to_bfl(dict(original), cfg)
        check_bfl_roundtrip(bfl, original, cfg)
        save_file(bfl, folder / "transformer_bfl.safetensors", metadata={"format": "pt"})
        refs = references(pipe, variant, cfg)
        save_file(refs, folder / "reference.safetensors", metadata={"format": "pt"})
        meta = {
            "prompt": PROMPT,
            "size": SIZE,
            "seed": SEED,
            "steps": STEPS[variant],
            "guidance": GUIDANCE,
            "max_sequence_length": T5_LEN,
            "tensors": {k: list(v.shape) for k, v in sorted(refs.items())},
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "diffusers": diffusers.__version__,
                "transformers": transformers.__version__,
                "sentencepiece": spm.__version__,
                "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
                "MKL_CBWR": os.environ.get("MKL_CBWR"),
            },
        }
        (folder / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(variant, {k: tuple(v.shape) for k, v in refs.items()}, "max|latents|", float(refs["latents"].abs().max()))
    shutil.rmtree(t5_tok_dir / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()
