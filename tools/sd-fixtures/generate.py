#!/usr/bin/env python3
"""Generate tiny, randomly initialised Stable Diffusion fixtures for Pictor's parity tests.

Builds SD1.5-, SD2.1- and SDXL-shaped models with the *real* diffusers / transformers
architectures (only the widths are shrunk), saves them in the diffusers folder layout,
writes original-layout (LDM / A1111 / ComfyUI) single-file checkpoints for sd15 and sd21,
and records what the reference diffusers pipelines compute on fixed inputs.

Usage (see README.md next to this file):

    ATEN_CPU_CAPABILITY=default python tools/sd-fixtures/generate.py [--out DIR] [--arch sd15 ...]
    python tools/sd-fixtures/generate.py --compare DIR_A DIR_B   # bitwise comparison of two runs

Never touches the network: everything is built locally (HF_HUB_OFFLINE=1).
"""

import os

# SD_FIXTURES_UNPINNED=1 runs with torch's normal fast CPU paths instead (only to measure how far
# an unpinned float32 implementation drifts from the committed references; never commit its output).
UNPINNED = os.environ.get("SD_FIXTURES_UNPINNED") == "1"
if not UNPINNED:
    # Must be set before torch is imported: pin the ATen CPU kernels to the portable (non-AVX) ones
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "default")
    # MKL (torch's BLAS) otherwise picks code paths by CPU *and by pointer alignment*, which made two
    # copies of the same weights give 1-ulp different Linear outputs in one process. COMPATIBLE = the
    # conditional-numerical-reproducibility mode that is identical on every x86-64 CPU.
    os.environ.setdefault("MKL_CBWR", "COMPATIBLE")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["DIFFUSERS_NO_ADVISORY_WARNINGS"] = "1"

import argparse
import collections
import copy
import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
torch.set_num_interop_threads(1)
torch.use_deterministic_algorithms(True)
# oneDNN convolutions dispatch on the host ISA (AVX2 / AVX-512 ...); the native ATen path
# (im2col + MKL sgemm) follows ATEN_CPU_CAPABILITY / MKL_CBWR instead.
torch.backends.mkldnn.enabled = UNPINNED

import diffusers  # noqa: E402
import safetensors  # noqa: E402
import transformers  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKL,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    StableDiffusionImg2ImgPipeline,
    StableDiffusionPipeline,
    StableDiffusionXLPipeline,
    UNet2DConditionModel,
)
from PIL import Image  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    CLIPTextConfig,
    CLIPTextModel,
    CLIPTextModelWithProjection,
    CLIPTokenizer,
)

diffusers.utils.logging.set_verbosity_error()
transformers.utils.logging.set_verbosity_error()
try:
    diffusers.utils.logging.disable_progress_bar()
except AttributeError:
    pass

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "crates" / "pictor-diffusion" / "tests" / "fixtures" / "diffusion"

PROMPT = "a photo of a red car, the astronaut!"
NEGATIVE = "blurry"
HEIGHT = WIDTH = 64
STEPS = 4
GUIDANCE = 7.5
LATENT_SEED = 42  # torch.Generator("cpu").manual_seed(42) -> init_latents
ANCESTRAL_SEED = 4242  # pre-drawn Euler-ancestral per-step noise
IMG2IMG_SEED = 4343  # pre-drawn img2img noise + VAE posterior noise
IMG2IMG_STRENGTH = 0.5
MAX_LEN = 77
N_MERGES = 300

# Widths are smaller than first specified ((32, 64) UNet, (8, 16, 16, 16) VAE): with those the
# three UNets alone are ~12 MB of float32, far over the fixture budget (< 4 MB for everything).
# The structure (levels, block types, shortcuts, heads, transformer depth) is unchanged.
UNET_BLOCK_OUT = (8, 16)
UNET_NORM_GROUPS = 4  # 2 / 4 channels per group
VAE_BLOCK_OUT = (4, 8, 8, 8)  # x1, x2, x2, x2 like the real (128, 256, 512, 512): same shortcut pattern
VAE_NORM_GROUPS = 2  # 2 / 4 channels per group
# Single-file checkpoints are written in float16, as most circulating A1111 / ComfyUI checkpoints
# are; all weights were rounded to the fp16 grid, so they are bit-identical to the fp32 folder.
SINGLE_FILE_DTYPE = torch.float16

ARCH_SEEDS = {"sd15": 1500, "sd21": 2100, "sdxl": 3000}


# ----------------------------------------------------------------------------- tokenizer


def bytes_to_unicode():
    """The GPT-2 / CLIP byte -> printable unicode table (same order as CLIP's vocab)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


# English words the BPE merges are learned from (weights = repetition count).
BPE_CORPUS = (
    "a photo of a red car, the astronaut! blurry " * 6
    + "a portrait of an astronaut riding a horse on mars, highly detailed digital painting, "
    "trending on artstation, sharp focus, studio lighting, cinematic, beautiful landscape "
    "with mountains and a lake at sunset, oil painting, a cute cat sitting in a garden, "
    "watercolor, city street at night, neon lights, rain, masterpiece, best quality, "
    "low quality, worst quality, ugly, deformed, it's the cat's toy, naive cafe, a red "
    "car parked in the street, the photo of the cat, photograph, photorealistic, dog, "
    "tree, house, sky, blue, green, white, black, yellow, orange, purple, forest, river, "
    "ocean, beach, space, stars, moon, sun, clouds, flowers, portrait, woman, man, "
    "children, playing, running, standing, looking, camera, lens, bokeh, hdr, 4k, 8k "
) * 2


def learn_bpe(corpus, n_merges):
    """Plain BPE learning on CLIP-style words ("</w>" on the last symbol).

    Deterministic: most frequent pair first, ties broken by the pair's strings.
    Merges whose result string already exists are skipped so vocab ids stay unique."""
    import regex

    pat = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""")
    b2u = bytes_to_unicode()
    words = collections.Counter()
    for w in pat.findall(corpus.lower()):
        sym = [b2u[b] for b in w.encode("utf-8")]
        sym[-1] = sym[-1] + "</w>"
        words[tuple(sym)] += 1
    base = list(b2u.values())
    known = set(base) | {s + "</w>" for s in base}
    merges = []
    words = dict(words)
    banned = set()
    while len(merges) < n_merges:
        pairs = collections.Counter()
        for w, f in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += f
        cands = [(-f, p) for p, f in pairs.items() if p not in banned]
        if not cands:
            break
        cands.sort()
        _, best = cands[0]
        merged = best[0] + best[1]
        if merged in known:
            banned.add(best)
            continue
        known.add(merged)
        merges.append(best)
        new_words = {}
        for w, f in words.items():
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + f
        words = new_words
    return merges


def build_vocab(merges):
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab]
    vocab += [a + b for a, b in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    assert len(set(vocab)) == len(vocab)
    return {t: i for i, t in enumerate(vocab)}


def make_tokenizer(vocab, merges, pad_token):
    tok = CLIPTokenizer(
        vocab=dict(vocab),
        merges=list(merges),
        unk_token="<|endoftext|>",
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token=pad_token,
        model_max_length=MAX_LEN,
    )
    return tok


def write_tokenizer_files(tok_dir, vocab, merges):
    """Make the tokenizer folder look like the real SD repos' (vocab.json, merges.txt,
    tokenizer_config.json). transformers 5's save_pretrained writes tokenizer.json +
    tokenizer_config.json; tokenizer.json is dropped (the real repos do not ship one), so
    loaders must build the BPE from vocab.json + merges.txt. save_and_reload checks that
    transformers does so with identical ids."""
    (tok_dir / "tokenizer.json").unlink(missing_ok=True)
    with open(tok_dir / "vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(tok_dir / "merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")


TOKENIZER_CASES = [
    "A PHOTO of a Red CAR, THE Astronaut",
    'hello, world!!! (masterpiece:1.2), [cat] {dog} <tag> "quoted" ... -_-',
    "it's the astronaut's car; isn't it? we're here, they'll go, I'd say you've seen I'm ok",
    "1234 cats, 56.7% of 2024 and 0.5x",
    "naïve café, Ünïcödé Straße 🚀 日本",
    "   a   photo\tof \n\n a    cat   ",
    # exactly 100 words (~190 tokens): checks truncation to 77 with <|endoftext|> kept last
    " ".join(
        (
            (
                "the astronaut painted a red car in the city street at night while a cute cat "
                "watched from the garden under neon lights and rain xylophone quokka"
            ).split()
            * 4
        )[:100]
    ),
    "",
]


def tokenize_case(tok, text):
    padded = tok(text, padding="max_length", max_length=MAX_LEN, truncation=True).input_ids
    full = tok(text, truncation=False).input_ids
    return padded, full


# ----------------------------------------------------------------------------- models


def perturb_and_round(module, seed):
    """Make every parameter non-trivial and exactly representable in float16.

    * constant tensors (norm weights = 1, biases = 0, CLIP's zero Linear biases) get
      +0.1 * N(0, 1) so swapped/missing affine terms are caught by the parity tests;
    * every parameter is rounded to the float16 grid (stored as float32), so an fp16
      export of the same weights is bit-identical after upcasting."""
    g = torch.Generator("cpu").manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if p.numel() > 0 and bool((p == p.flatten()[0]).all()):
                p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
            p.copy_(p.to(torch.float16).to(torch.float32))


def unet_config(arch):
    common = dict(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        block_out_channels=UNET_BLOCK_OUT,
        layers_per_block=1,
        norm_num_groups=UNET_NORM_GROUPS,
    )
    if arch == "sd15":
        return dict(
            common,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32,
            attention_head_dim=8,
        )
    if arch == "sd21":
        return dict(
            common,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32,
            attention_head_dim=(2, 4),
            use_linear_projection=True,
        )
    if arch == "sdxl":
        return dict(
            common,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=32 + 48,
            attention_head_dim=(2, 4),
            use_linear_projection=True,
            transformer_layers_per_block=(1, 2),
            addition_embed_type="text_time",
            addition_time_embed_dim=8,
            projection_class_embeddings_input_dim=8 * 6 + 40,
        )
    raise ValueError(arch)


def vae_config(arch):
    return dict(
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4,
        block_out_channels=VAE_BLOCK_OUT,
        layers_per_block=1,
        norm_num_groups=VAE_NORM_GROUPS,
        latent_channels=4,
        sample_size=64,
        scaling_factor=0.13025 if arch == "sdxl" else 0.18215,
    )


def text_config(vocab, pad_token, hidden_act, layers, hidden=32, projection=32):
    return CLIPTextConfig(
        hidden_size=hidden,
        intermediate_size=37,
        num_hidden_layers=layers,
        num_attention_heads=4,
        max_position_embeddings=MAX_LEN,
        vocab_size=len(vocab),
        hidden_act=hidden_act,
        projection_dim=projection,
        bos_token_id=vocab["<|startoftext|>"],
        eos_token_id=vocab["<|endoftext|>"],
        pad_token_id=vocab[pad_token],
    )


def scheduler_for(arch):
    return EulerDiscreteScheduler(
        num_train_timesteps=1000,
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        steps_offset=1,
        timestep_spacing="trailing" if arch == "sdxl" else "leading",
        prediction_type="v_prediction" if arch == "sd21" else "epsilon",
    )


def legacy_text_encoder_keys(te_dir):
    """transformers >= 5.6 saves CLIPTextModel without the `text_model.` prefix. Every real
    SD repo (and every single-file checkpoint) uses the prefixed names, so rewrite them."""
    path = te_dir / "model.safetensors"
    sd = load_file(path)
    if any(k.startswith("text_model.") for k in sd):
        return False
    sd = {"text_model." + k: v.contiguous() for k, v in sd.items()}
    save_file(sd, path, metadata={"format": "pt"})
    return True


def build_pipeline(arch, vocab, merges):
    base = ARCH_SEEDS[arch]
    torch.manual_seed(base + 1)
    unet = UNet2DConditionModel(**unet_config(arch))
    perturb_and_round(unet, base + 11)
    torch.manual_seed(base + 2)
    vae = AutoencoderKL(**vae_config(arch))
    perturb_and_round(vae, base + 12)
    sched = scheduler_for(arch)
    if arch == "sdxl":
        tok1 = make_tokenizer(vocab, merges, "<|endoftext|>")
        tok2 = make_tokenizer(vocab, merges, "!")
        torch.manual_seed(base + 3)
        te1 = CLIPTextModel(text_config(vocab, "<|endoftext|>", "quick_gelu", 2))
        perturb_and_round(te1, base + 13)
        torch.manual_seed(base + 4)
        # A wider second encoder with a non-square projection, as SDXL's (768 vs 1280 -> 1280):
        # diffusers' single-file loader tells the two encoders apart by width, and a transposed
        # projection cannot go unnoticed.
        te2 = CLIPTextModelWithProjection(text_config(vocab, "!", "gelu", 3, hidden=48, projection=40))
        perturb_and_round(te2, base + 14)
        pipe = StableDiffusionXLPipeline(
            vae=vae,
            text_encoder=te1,
            text_encoder_2=te2,
            tokenizer=tok1,
            tokenizer_2=tok2,
            unet=unet,
            scheduler=sched,
            force_zeros_for_empty_prompt=True,
            add_watermarker=False,
        )
    else:
        pad = "<|endoftext|>" if arch == "sd15" else "!"
        act = "quick_gelu" if arch == "sd15" else "gelu"
        tok = make_tokenizer(vocab, merges, pad)
        torch.manual_seed(base + 3)
        te = CLIPTextModel(text_config(vocab, pad, act, 2))
        perturb_and_round(te, base + 13)
        pipe = StableDiffusionPipeline(
            vae=vae,
            text_encoder=te,
            tokenizer=tok,
            unet=unet,
            scheduler=sched,
            safety_checker=None,
            feature_extractor=None,
            requires_safety_checker=False,
        )
    for m in (unet, vae):
        m.eval()
    return pipe


def state_dicts_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    if set(sa) != set(sb):
        return False
    return all(torch.equal(sa[k], sb[k]) for k in sa)


def save_and_reload(pipe, arch, model_dir, vocab, merges):
    if model_dir.exists():
        shutil.rmtree(model_dir)
    pipe.save_pretrained(model_dir, safe_serialization=True)
    te_names = ["text_encoder", "text_encoder_2"] if arch == "sdxl" else ["text_encoder"]
    tok_names = ["tokenizer", "tokenizer_2"] if arch == "sdxl" else ["tokenizer"]
    for te in te_names:
        legacy_text_encoder_keys(model_dir / te)
    for tk in tok_names:
        write_tokenizer_files(model_dir / tk, vocab, merges)
    cls = StableDiffusionXLPipeline if arch == "sdxl" else StableDiffusionPipeline
    kwargs = {} if arch == "sdxl" else {"safety_checker": None}
    reloaded = cls.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32, **kwargs)
    for name in ["unet", "vae"] + te_names:
        assert state_dicts_equal(getattr(pipe, name), getattr(reloaded, name)), f"{arch}: {name} reload differs"
    # the text encoders must load from the legacy-prefixed files without missing/unexpected keys
    for te in te_names:
        te_cls = type(getattr(pipe, te))
        _, info = te_cls.from_pretrained(model_dir / te, local_files_only=True, output_loading_info=True)
        bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
        assert not bad, f"{arch}/{te}: {bad}"
    # the tokenizer transformers rebuilds from vocab.json + merges.txt must agree with the original
    for tk in tok_names:
        saved, orig = getattr(reloaded, tk), getattr(pipe, tk)
        assert (saved.pad_token, saved.pad_token_id, saved.model_max_length) == (orig.pad_token, orig.pad_token_id, MAX_LEN)
        for text in TOKENIZER_CASES + [PROMPT, NEGATIVE]:
            assert tokenize_case(saved, text) == tokenize_case(orig, text), (arch, tk, text)
    return reloaded


# ----------------------------------------------------------------------------- helpers


class NoiseQueue:
    """Stand-in for diffusers' randn_tensor that hands out pre-drawn tensors in order."""

    def __init__(self, tensors, name):
        self.tensors = list(tensors)
        self.name = name
        self.calls = 0

    def __call__(self, shape, generator=None, device=None, dtype=None, layout=None, **kw):
        assert self.calls < len(self.tensors), f"{self.name}: more randn_tensor calls than pre-drawn tensors"
        t = self.tensors[self.calls]
        assert tuple(t.shape) == tuple(shape), (self.name, t.shape, shape)
        self.calls += 1
        return t.clone().to(dtype=dtype or t.dtype)


class patched:
    def __init__(self, module, attr, value):
        self.module, self.attr, self.value = module, attr, value

    def __enter__(self):
        self.old = getattr(self.module, self.attr)
        setattr(self.module, self.attr, self.value)
        return self.value

    def __exit__(self, *exc):
        setattr(self.module, self.attr, self.old)


class UNetRecorder:
    """forward hook recording every UNet call (model input, timestep, output)."""

    def __init__(self, unet):
        self.inputs, self.timesteps, self.outputs = [], [], []
        self.h = unet.register_forward_hook(self.hook, with_kwargs=True)

    def hook(self, mod, args, kwargs, out):
        sample = args[0] if args else kwargs["sample"]
        t = args[1] if len(args) > 1 else kwargs["timestep"]
        self.inputs.append(sample.detach().clone())
        self.timesteps.append(float(torch.as_tensor(t).flatten()[0]))
        self.outputs.append((out[0] if isinstance(out, tuple) else out.sample).detach().clone())

    def close(self):
        self.h.remove()


def step_recorder():
    rec = {"latents": [], "t": []}

    def cb(pipe, i, t, kw):
        rec["latents"].append(kw["latents"].detach().clone())
        rec["t"].append(float(t))
        return kw

    return rec, cb


def sched_info(s):
    cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dict(s.config).items()}
    return {
        "class": type(s).__name__,
        "config": cfg,
        "timesteps": [float(x) for x in s.timesteps],
        "sigmas": [float(x) for x in getattr(s, "sigmas", [])],
        "init_noise_sigma": float(s.init_noise_sigma),
    }


def f32(t):
    return t.detach().to(torch.float32).contiguous().clone()


# ----------------------------------------------------------------------------- references


def run_pipe(pipe, arch, scheduler, init_latents, *, output_type="latent", steps=STEPS, guidance=GUIDANCE, negative=True, record_unet=False):
    pipe.scheduler = scheduler
    rec, cb = step_recorder()
    unet_rec = UNetRecorder(pipe.unet) if record_unet else None
    kwargs = dict(
        prompt=PROMPT,
        negative_prompt=NEGATIVE if negative else None,
        height=HEIGHT,
        width=WIDTH,
        num_inference_steps=steps,
        guidance_scale=guidance,
        latents=init_latents.clone(),
        output_type=output_type,
        callback_on_step_end=cb,
        callback_on_step_end_tensor_inputs=["latents"],
    )
    if arch == "sdxl":
        kwargs.update(original_size=(HEIGHT, WIDTH), target_size=(HEIGHT, WIDTH), crops_coords_top_left=(0, 0))
    with torch.no_grad():
        out = pipe(**kwargs)
    if unet_rec:
        unet_rec.close()
    result = out.images
    if output_type == "np":
        result = torch.from_numpy(np.ascontiguousarray(result)).to(torch.float32)
    info = sched_info(pipe.scheduler)
    info.update(steps=steps, guidance_scale=guidance, negative_prompt=NEGATIVE if negative else None, callback_timesteps=rec["t"])
    return result, torch.stack(rec["latents"]), info, unet_rec


def make_references(pipe, arch):
    t = {}
    meta = {}
    base_sched_cfg = dict(pipe.scheduler.config)

    def fresh(cls, **over):
        return cls.from_config(base_sched_cfg, **over)

    # ---- tokenizer ids
    toks = [("", pipe.tokenizer)] + ([("_2", pipe.tokenizer_2)] if arch == "sdxl" else [])
    for sfx, tok in toks:
        t["prompt_ids" + sfx] = torch.tensor([tokenize_case(tok, PROMPT)[0]], dtype=torch.int64)
        t["negative_ids" + sfx] = torch.tensor([tokenize_case(tok, NEGATIVE)[0]], dtype=torch.int64)
    cases = []
    for text in TOKENIZER_CASES:
        c = {"text": text}
        for sfx, tok in toks:
            padded, full = tokenize_case(tok, text)
            c["input_ids" + sfx] = padded
            c["ids_untruncated" + sfx] = full
            c["tokens" + sfx] = tok.convert_ids_to_tokens(full)
        cases.append(c)
    meta["tokenizer_cases"] = cases

    # ---- prompt encoding (what encode_prompt returns)
    with torch.no_grad():
        if arch == "sdxl":
            pe, ne, pp, npp = pipe.encode_prompt(
                prompt=PROMPT, device=torch.device("cpu"), num_images_per_prompt=1,
                do_classifier_free_guidance=True, negative_prompt=NEGATIVE,
            )
            t["pooled_prompt_embeds"] = f32(pp)
            t["negative_pooled_prompt_embeds"] = f32(npp)
            add_time_ids = pipe._get_add_time_ids(
                (HEIGHT, WIDTH), (0, 0), (HEIGHT, WIDTH), dtype=torch.float32,
                text_encoder_projection_dim=pipe.text_encoder_2.config.projection_dim,
            )
            t["add_time_ids"] = f32(add_time_ids)
        else:
            pe, ne = pipe.encode_prompt(PROMPT, torch.device("cpu"), 1, True, NEGATIVE)
    t["prompt_embeds"] = f32(pe)
    t["negative_embeds"] = f32(ne)

    # ---- fixed starting noise
    init_latents = torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=torch.Generator("cpu").manual_seed(LATENT_SEED), dtype=torch.float32)
    t["init_latents"] = init_latents.clone()

    # ---- single UNet evaluation at the first Euler timestep (batch 1, no CFG)
    s = fresh(EulerDiscreteScheduler)
    s.set_timesteps(STEPS, device="cpu")
    t0 = s.timesteps[0]
    sample = init_latents * s.init_noise_sigma
    model_in = s.scale_model_input(sample, t0)
    added = None
    if arch == "sdxl":
        added = {"text_embeds": t["pooled_prompt_embeds"], "time_ids": t["add_time_ids"]}
    with torch.no_grad():
        unet_out = pipe.unet(model_in, t0, encoder_hidden_states=t["prompt_embeds"], added_cond_kwargs=added, return_dict=False)[0]
    t["unet_in"] = f32(model_in)
    t["unet_t"] = torch.tensor([float(t0)], dtype=torch.float32)
    t["unet_out"] = f32(unet_out)
    meta["unet_eval"] = {
        "timestep": float(t0),
        "init_noise_sigma": float(s.init_noise_sigma),
        "sigma": float(s.sigmas[0]),
        "unet_in": "scheduler.scale_model_input(init_latents * init_noise_sigma, timestep) = init_latents * init_noise_sigma / sqrt(sigma^2 + 1)",
        "encoder_hidden_states": "prompt_embeds",
        "added_cond_kwargs": "text_embeds=pooled_prompt_embeds, time_ids=add_time_ids" if arch == "sdxl" else None,
    }

    runs = {}
    # ---- Euler (latent output) + raw UNet calls
    lat, steps_lat, info, urec = run_pipe(pipe, arch, fresh(EulerDiscreteScheduler), init_latents, record_unet=True)
    t["latents_euler"] = f32(lat)
    t["latents_euler_steps"] = f32(steps_lat)
    t["euler_unet_inputs"] = f32(torch.stack(urec.inputs))
    t["euler_unet_outputs"] = f32(torch.stack(urec.outputs))
    info["unet_call_timesteps"] = urec.timesteps
    info["unet_batch_order"] = ["negative (uncond)", "positive (cond)"]
    runs["euler"] = info

    # ---- Euler, decoded image
    img, steps_img, info_img, _ = run_pipe(pipe, arch, fresh(EulerDiscreteScheduler), init_latents, output_type="np")
    assert torch.equal(steps_img, steps_lat), "Euler rerun (np output) differs from the latent run"
    t["image_euler"] = f32(img)
    runs["euler_image"] = dict(info_img, note="same run as 'euler' with output_type='np'; per-step latents were bit-identical")

    sf = pipe.vae.config.scaling_factor
    with torch.no_grad():
        dec_in = t["latents_euler"] / sf
        dec_out = pipe.vae.decode(dec_in, return_dict=False)[0]
    t["vae_decode_in"] = f32(dec_in)
    t["vae_decode_out"] = f32(dec_out)

    # ---- Euler ancestral with captured per-step noise
    g = torch.Generator("cpu").manual_seed(ANCESTRAL_SEED)
    anc = torch.randn((STEPS, 1, 4, HEIGHT // 8, WIDTH // 8), generator=g, dtype=torch.float32)
    q = NoiseQueue(list(anc), "euler_a")
    import diffusers.schedulers.scheduling_euler_ancestral_discrete as ea_mod

    with patched(ea_mod, "randn_tensor", q):
        lat, steps_lat, info, _ = run_pipe(pipe, arch, fresh(EulerAncestralDiscreteScheduler), init_latents)
    assert q.calls == STEPS, q.calls
    t["ancestral_noise"] = anc
    t["latents_euler_a"] = f32(lat)
    t["latents_euler_a_steps"] = f32(steps_lat)
    info["noise"] = "step i uses ancestral_noise[i] (randn_tensor monkeypatched; one call per step, including the last where sigma_up = 0)"
    runs["euler_a"] = info

    # ---- DPM++ 2M Karras
    dpm = fresh(DPMSolverMultistepScheduler, use_karras_sigmas=True, algorithm_type="dpmsolver++", solver_order=2)
    lat, steps_lat, info, _ = run_pipe(pipe, arch, dpm, init_latents)
    t["latents_dpmpp2m_karras"] = f32(lat)
    t["latents_dpmpp2m_karras_steps"] = f32(steps_lat)
    runs["dpmpp2m_karras"] = info

    if arch == "sdxl":
        lat, steps_lat, info, _ = run_pipe(pipe, arch, fresh(EulerDiscreteScheduler), init_latents, steps=1, guidance=0.0, negative=False)
        t["latents_sdxl_cfg0"] = f32(lat)
        info["note"] = "guidance_scale 0 -> no CFG, batch 1, negative prompt not encoded"
        runs["sdxl_cfg0"] = info

    if arch == "sd15":
        t_i2i, meta_i2i = img2img_reference(pipe, fresh(EulerDiscreteScheduler))
        t.update(t_i2i)
        runs["img2img"] = meta_i2i

    meta["runs"] = runs
    return t, meta


def gradient_image():
    x = np.arange(WIDTH, dtype=np.int64)[None, :].repeat(HEIGHT, 0)
    y = np.arange(HEIGHT, dtype=np.int64)[:, None].repeat(WIDTH, 1)
    arr = np.stack([x * 4, y * 4, np.full_like(x, 128)], axis=-1).astype(np.uint8)
    return arr


def img2img_reference(pipe, scheduler):
    import diffusers.models.autoencoders.vae as vae_mod
    import diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion_img2img as i2i_mod

    t = {}
    arr = gradient_image()
    pil = Image.fromarray(arr, "RGB")
    i2i = StableDiffusionImg2ImgPipeline(**pipe.components)
    i2i.scheduler = scheduler
    g = torch.Generator("cpu").manual_seed(IMG2IMG_SEED)
    post_noise = torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g, dtype=torch.float32)
    add_noise = torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g, dtype=torch.float32)

    image_in = i2i.image_processor.preprocess(pil).to(torch.float32)
    expect = 2.0 * (torch.from_numpy(arr).to(torch.float32) / 255.0) - 1.0
    assert torch.equal(image_in, expect.permute(2, 0, 1)[None]), "image preprocessing formula"
    with torch.no_grad():
        dist = pipe.vae.encode(image_in).latent_dist
    captured = {}
    orig_add_noise = scheduler.add_noise

    def add_noise_spy(original_samples, noise, timesteps):
        out = orig_add_noise(original_samples, noise, timesteps)
        captured["init"] = original_samples.detach().clone()
        captured["noised"] = out.detach().clone()
        captured["t"] = [float(x) for x in torch.as_tensor(timesteps).flatten()]
        return out

    scheduler.add_noise = add_noise_spy
    rec, cb = step_recorder()
    q_post = NoiseQueue([post_noise], "vae_posterior")
    q_add = NoiseQueue([add_noise], "img2img_noise")
    with patched(vae_mod, "randn_tensor", q_post), patched(i2i_mod, "randn_tensor", q_add), torch.no_grad():
        out = i2i(
            prompt=PROMPT, negative_prompt=NEGATIVE, image=pil, strength=IMG2IMG_STRENGTH,
            num_inference_steps=STEPS, guidance_scale=GUIDANCE, output_type="latent",
            callback_on_step_end=cb, callback_on_step_end_tensor_inputs=["latents"],
        )
    del scheduler.add_noise
    assert q_post.calls == 1 and q_add.calls == 1, (q_post.calls, q_add.calls)
    sf = pipe.vae.config.scaling_factor
    expect_init = sf * (dist.mean + dist.std * post_noise)
    assert torch.allclose(expect_init, captured["init"], rtol=0, atol=1e-6), "posterior-sample reconstruction mismatch"

    t["img2img_image"] = torch.from_numpy(arr).contiguous()  # uint8 [64,64,3]
    t["img2img_image_in"] = f32(image_in)
    t["img2img_posterior_mean"] = f32(dist.mean)
    t["img2img_posterior_std"] = f32(dist.std)
    t["img2img_posterior_noise"] = post_noise
    t["img2img_init_latents"] = f32(captured["init"])
    t["img2img_noise"] = add_noise
    t["img2img_noised_latents"] = f32(captured["noised"])
    t["latents_img2img"] = f32(out.images)
    t["latents_img2img_steps"] = f32(torch.stack(rec["latents"]))
    info = sched_info(i2i.scheduler)
    info.update(
        strength=IMG2IMG_STRENGTH, steps=STEPS, guidance_scale=GUIDANCE, negative_prompt=NEGATIVE,
        callback_timesteps=rec["t"], add_noise_timestep=captured["t"],
        begin_index=int(i2i.scheduler.begin_index) if i2i.scheduler.begin_index is not None else None,
        init_image="uint8 RGB 64x64: R = 4*x, G = 4*y, B = 128 (x = column, y = row); stored as img2img_image [64,64,3]",
        image_in="image_processor.preprocess: float32 NCHW, 2 * (float32(uint8) / 255) - 1 (exactly; checked)",
        vae_posterior=(
            "the reference used a SAMPLE of the VAE posterior (retrieve_latents sample_mode='sample'): "
            "img2img_init_latents = scaling_factor * (img2img_posterior_mean + img2img_posterior_std * img2img_posterior_noise); "
            "posterior_std = exp(0.5 * clamp(logvar, -30, 20)). randn_tensor in diffusers.models.autoencoders.vae was monkeypatched to return img2img_posterior_noise"
        ),
        noise=(
            "img2img_noised_latents = scheduler.add_noise(img2img_init_latents, img2img_noise, timesteps[begin_index]) "
            "= init + sigma * noise (Euler); randn_tensor in pipeline_stable_diffusion_img2img monkeypatched to return img2img_noise"
        ),
    )
    return t, info


# ----------------------------------------------------------------------------- single-file export


def unet_diffusers_to_ldm(sd, cfg):
    """diffusers UNet2DConditionModel keys -> original LDM `model.diffusion_model.*` keys.

    Same mapping as diffusers' scripts/convert_diffusers_to_original_stable_diffusion.py, but
    derived from the config instead of hard-coding SD1.x's 4 levels x 2 resnets, so it is right
    for any layers_per_block / number of levels."""
    L = cfg["layers_per_block"]
    n = len(cfg["block_out_channels"])
    prefix_map = {}
    for i in range(n):
        for j in range(L):
            prefix_map[f"down_blocks.{i}.resnets.{j}."] = f"input_blocks.{(L + 1) * i + j + 1}.0."
            prefix_map[f"down_blocks.{i}.attentions.{j}."] = f"input_blocks.{(L + 1) * i + j + 1}.1."
        if i < n - 1:
            prefix_map[f"down_blocks.{i}.downsamplers.0.conv."] = f"input_blocks.{(L + 1) * (i + 1)}.0.op."
        up_has_attn = "CrossAttn" in cfg["up_block_types"][i]
        for j in range(L + 1):
            prefix_map[f"up_blocks.{i}.resnets.{j}."] = f"output_blocks.{(L + 1) * i + j}.0."
            prefix_map[f"up_blocks.{i}.attentions.{j}."] = f"output_blocks.{(L + 1) * i + j}.1."
        if i < n - 1:
            prefix_map[f"up_blocks.{i}.upsamplers.0."] = f"output_blocks.{(L + 1) * i + L}.{2 if up_has_attn else 1}."
    prefix_map["mid_block.resnets.0."] = "middle_block.0."
    prefix_map["mid_block.attentions.0."] = "middle_block.1."
    prefix_map["mid_block.resnets.1."] = "middle_block.2."
    top = {
        "time_embedding.linear_1.": "time_embed.0.",
        "time_embedding.linear_2.": "time_embed.2.",
        "add_embedding.linear_1.": "label_emb.0.0.",
        "add_embedding.linear_2.": "label_emb.0.2.",
        "conv_in.": "input_blocks.0.0.",
        "conv_norm_out.": "out.0.",
        "conv_out.": "out.2.",
    }
    resnet_map = [
        ("norm1.", "in_layers.0."),
        ("conv1.", "in_layers.2."),
        ("norm2.", "out_layers.0."),
        ("conv2.", "out_layers.3."),
        ("time_emb_proj.", "emb_layers.1."),
        ("conv_shortcut.", "skip_connection."),
    ]
    out = {}
    for k, v in sd.items():
        nk = None
        for hf, ldm in top.items():
            if k.startswith(hf):
                nk = ldm + k[len(hf):]
        if nk is None:
            for hf, ldm in prefix_map.items():
                if k.startswith(hf):
                    rest = k[len(hf):]
                    if ".resnets." in hf:
                        for a, b in resnet_map:
                            if rest.startswith(a):
                                rest = b + rest[len(a):]
                                break
                        else:
                            raise KeyError(k)
                    nk = ldm + rest
                    break
        if nk is None:
            raise KeyError(f"unmapped UNet key {k}")
        out["model.diffusion_model." + nk] = v
    assert len(out) == len(sd)
    return out


def vae_diffusers_to_ldm(sd, cfg):
    """diffusers AutoencoderKL -> `first_stage_model.*` (as the diffusers conversion script writes:
    mid-block attention q/k/v/proj_out as 1x1 conv weights [C, C, 1, 1])."""
    n = len(cfg["block_out_channels"])
    L = cfg["layers_per_block"]
    prefix_map = {}
    for i in range(n):
        for j in range(L):
            prefix_map[f"encoder.down_blocks.{i}.resnets.{j}."] = f"encoder.down.{i}.block.{j}."
        if i < n - 1:
            prefix_map[f"encoder.down_blocks.{i}.downsamplers.0."] = f"encoder.down.{i}.downsample."
            prefix_map[f"decoder.up_blocks.{i}.upsamplers.0."] = f"decoder.up.{n - 1 - i}.upsample."
        for j in range(L + 1):
            prefix_map[f"decoder.up_blocks.{i}.resnets.{j}."] = f"decoder.up.{n - 1 - i}.block.{j}."
    for part in ("encoder", "decoder"):
        prefix_map[f"{part}.mid_block.resnets.0."] = f"{part}.mid.block_1."
        prefix_map[f"{part}.mid_block.resnets.1."] = f"{part}.mid.block_2."
        prefix_map[f"{part}.mid_block.attentions.0."] = f"{part}.mid.attn_1."
        prefix_map[f"{part}.conv_norm_out."] = f"{part}.norm_out."
    attn_map = [("group_norm.", "norm."), ("to_q.", "q."), ("to_k.", "k."), ("to_v.", "v."), ("to_out.0.", "proj_out.")]
    out = {}
    for k, v in sd.items():
        nk = k
        for hf, ldm in prefix_map.items():
            if k.startswith(hf):
                rest = k[len(hf):]
                if ".attentions." in hf:
                    for a, b in attn_map:
                        if rest.startswith(a):
                            rest = b + rest[len(a):]
                            if b != "norm." and rest.endswith("weight") and v.ndim == 2:
                                v = v.reshape(*v.shape, 1, 1)
                            break
                    else:
                        raise KeyError(k)
                rest = rest.replace("conv_shortcut.", "nin_shortcut.")
                nk = ldm + rest
                break
        out["first_stage_model." + nk] = v
    assert len(out) == len(sd)
    return out


def clip_to_ldm_v1(sd):
    return {"cond_stage_model.transformer." + k: v for k, v in sd.items()}


def clip_to_openclip_v2(sd, prefix="cond_stage_model.model."):
    """HF CLIPTextModel -> OpenCLIP `cond_stage_model.model.*` with fused in_proj (what
    convert_text_enc_state_dict_v20 writes; no logit_scale, same layer count). SDXL's second
    encoder (CLIPTextModelWithProjection, `conditioner.embedders.1.model.*`) also has the
    projection, stored transposed as OpenCLIP's `text_projection` (x @ P)."""
    out = {}
    qkv = collections.defaultdict(dict)
    for k, v in sd.items():
        if k == "text_model.embeddings.token_embedding.weight":
            out["token_embedding.weight"] = v
        elif k == "text_model.embeddings.position_embedding.weight":
            out["positional_embedding"] = v
        elif k.startswith("text_model.final_layer_norm."):
            out["ln_final." + k.split(".")[-1]] = v
        elif k == "text_projection.weight":
            out["text_projection"] = v.t().contiguous()
        elif k.startswith("text_model.encoder.layers."):
            rest = k[len("text_model.encoder.layers."):]
            idx, sub = rest.split(".", 1)
            pre = f"transformer.resblocks.{idx}."
            if sub.startswith("self_attn.") and sub.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
                proj, kind = sub.split(".")[1], sub.split(".")[2]
                qkv[(pre, kind)][proj[0]] = v
                continue
            sub = (
                sub.replace("self_attn.out_proj.", "attn.out_proj.")
                .replace("layer_norm1.", "ln_1.")
                .replace("layer_norm2.", "ln_2.")
                .replace("mlp.fc1.", "mlp.c_fc.")
                .replace("mlp.fc2.", "mlp.c_proj.")
            )
            out[pre + sub] = v
        else:
            raise KeyError(k)
    for (pre, kind), d in qkv.items():
        out[pre + f"attn.in_proj_{kind}"] = torch.cat([d["q"], d["k"], d["v"]], 0)
    return {prefix + k: v for k, v in out.items()}


def inverse_check(ldm, hf_sd, mapping_fn, cfg=None, fused_qkv=False):
    """Invert a key mapping one key at a time and check every diffusers tensor is recovered
    bit-exactly from the single file (q/k/v re-split from in_proj for OpenCLIP), and that the
    single file holds nothing else."""
    used = set()
    qkv = collections.defaultdict(dict)
    for k, v in hf_sd.items():
        if fused_qkv and any(f"self_attn.{p}_proj." in k for p in "qkv"):
            layer = k.split(".")[3]
            qkv[(layer, k.rsplit(".", 1)[1])]["qkv".index(k.split(".")[5][0])] = v
            continue
        single = mapping_fn({k: v}, cfg) if cfg is not None else mapping_fn({k: v})
        (lk, lv), = single.items()
        assert lk in ldm, f"missing {lk}"
        got = ldm[lk].to(torch.float32)
        if lk.endswith(".text_projection"):
            got = got.t()
        assert got.numel() == v.numel() and torch.equal(got.reshape(v.shape), v.to(torch.float32)), k
        used.add(lk)
    for (layer, kind), parts in qkv.items():
        lk = f"{fused_qkv}transformer.resblocks.{layer}.attn.in_proj_{kind}"
        q, k_, v_ = ldm[lk].to(torch.float32).chunk(3, 0)
        assert torch.equal(q, parts[0]) and torch.equal(k_, parts[1]) and torch.equal(v_, parts[2]), lk
        used.add(lk)
    return used


def write_single_file(pipe, arch, model_dir, out_path, dtype):
    unet_sd = load_file(model_dir / "unet" / "diffusion_pytorch_model.safetensors")
    vae_sd = load_file(model_dir / "vae" / "diffusion_pytorch_model.safetensors")
    te_sd = load_file(model_dir / "text_encoder" / "model.safetensors")
    ckpt = {}
    ckpt.update(unet_diffusers_to_ldm(unet_sd, dict(pipe.unet.config)))
    ckpt.update(vae_diffusers_to_ldm(vae_sd, dict(pipe.vae.config)))
    if arch == "sd15":
        ckpt.update(clip_to_ldm_v1(te_sd))
    elif arch == "sd21":
        ckpt.update(clip_to_openclip_v2(te_sd))
    else:  # sdxl: CLIP ViT-L in HF naming, OpenCLIP bigG with projection
        ckpt.update({"conditioner.embedders.0.transformer." + k: v for k, v in te_sd.items()})
        te2_sd = load_file(model_dir / "text_encoder_2" / "model.safetensors")
        ckpt.update(clip_to_openclip_v2(te2_sd, "conditioner.embedders.1.model."))
    n_in = len(unet_sd) + len(vae_sd) + len(te_sd)
    if arch == "sd21":
        n_in -= 2 * 2 * pipe.text_encoder.config.num_hidden_layers  # q,k,v (w,b) fused into in_proj (w,b)
    if arch == "sdxl":
        n_in += len(te2_sd) - 2 * 2 * pipe.text_encoder_2.config.num_hidden_layers
    assert len(ckpt) == n_in, (len(ckpt), n_in)
    cast = {k: v.to(dtype).contiguous() for k, v in sorted(ckpt.items())}
    for k, v in cast.items():  # an fp16 export must be lossless (weights were rounded to the fp16 grid)
        assert torch.equal(v.to(torch.float32), ckpt[k]), k
    ckpt = cast
    save_file(ckpt, out_path, metadata={"format": "pt"})
    return ckpt


def verify_single_file(arch, single_path, model_dir, pipe, refs):
    """Load the single file with diffusers' from_single_file (offline, config = the local
    diffusers folder) and check it reproduces the reference UNet / text encoder / VAE outputs."""
    report = {}
    ldm = load_file(single_path)
    # 1) our own inverse mapping
    unet_sd = load_file(model_dir / "unet" / "diffusion_pytorch_model.safetensors")
    vae_sd = load_file(model_dir / "vae" / "diffusion_pytorch_model.safetensors")
    te_sd = load_file(model_dir / "text_encoder" / "model.safetensors")
    used = inverse_check(ldm, unet_sd, unet_diffusers_to_ldm, dict(pipe.unet.config))
    used |= inverse_check(ldm, vae_sd, vae_diffusers_to_ldm, dict(pipe.vae.config))
    if arch == "sd15":
        used |= inverse_check(ldm, te_sd, clip_to_ldm_v1)
    elif arch == "sd21":
        used |= inverse_check(ldm, te_sd, lambda d: clip_to_openclip_v2(d), fused_qkv="cond_stage_model.model.")
    else:
        used |= inverse_check(ldm, te_sd, lambda d: {"conditioner.embedders.0.transformer." + k: v for k, v in d.items()})
        te2_sd = load_file(model_dir / "text_encoder_2" / "model.safetensors")
        used |= inverse_check(
            ldm, te2_sd, lambda d: clip_to_openclip_v2(d, "conditioner.embedders.1.model."),
            fused_qkv="conditioner.embedders.1.model.",
        )
    assert used == set(ldm), sorted(set(ldm) - used)[:10]
    report["inverse_mapping"] = "ok: every single-file tensor maps back bit-exactly onto exactly one diffusers tensor (q/k/v re-split from in_proj)"
    # 2) diffusers from_single_file
    if arch == "sdxl":
        sf = StableDiffusionXLPipeline.from_single_file(
            str(single_path), config=str(model_dir), local_files_only=True, dtype=torch.float32,
        )
    else:
        sf = StableDiffusionPipeline.from_single_file(
            str(single_path), config=str(model_dir), local_files_only=True, dtype=torch.float32,
            safety_checker=None, requires_safety_checker=False,
        )
    for name in ("unet", "vae", "text_encoder") + (("text_encoder_2",) if arch == "sdxl" else ()):
        a, b = getattr(sf, name).state_dict(), getattr(pipe, name).state_dict()
        missing = sorted(set(b) - set(a))
        diff = [k for k in b if k in a and not torch.equal(a[k].float(), b[k].float())]
        assert not missing and not diff, (name, missing[:5], diff[:5])
    with torch.no_grad():
        if arch == "sdxl":
            added = {"text_embeds": refs["pooled_prompt_embeds"], "time_ids": refs["add_time_ids"]}
            u = sf.unet(refs["unet_in"], refs["unet_t"][0], encoder_hidden_states=refs["prompt_embeds"], added_cond_kwargs=added, return_dict=False)[0]
            pe, ne, _, _ = sf.encode_prompt(PROMPT, device=torch.device("cpu"), num_images_per_prompt=1, do_classifier_free_guidance=True, negative_prompt=NEGATIVE)
        else:
            u = sf.unet(refs["unet_in"], refs["unet_t"][0], encoder_hidden_states=refs["prompt_embeds"], return_dict=False)[0]
            pe, ne = sf.encode_prompt(PROMPT, torch.device("cpu"), 1, True, NEGATIVE)
        d = sf.vae.decode(refs["vae_decode_in"], return_dict=False)[0]
    report["from_single_file"] = {
        "unet_out_max_abs_diff": float((u - refs["unet_out"]).abs().max()),
        "prompt_embeds_max_abs_diff": float((pe - refs["prompt_embeds"]).abs().max()),
        "negative_embeds_max_abs_diff": float((ne - refs["negative_embeds"]).abs().max()),
        "vae_decode_out_max_abs_diff": float((d - refs["vae_decode_out"]).abs().max()),
        "state_dicts": "identical to the diffusers folder (unet, vae, text_encoder)",
    }
    if not UNPINNED:  # unpinned MKL results depend on buffer alignment, so two copies can differ by ~1 ulp
        assert all(v == 0.0 for k, v in report["from_single_file"].items() if k.endswith("diff")), report
    return report


# ----------------------------------------------------------------------------- main


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "tokenizers": __import__("tokenizers").__version__,
        "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_num_threads": torch.get_num_threads(),
        "MKL_CBWR": os.environ.get("MKL_CBWR"),
        "mkldnn_enabled": torch.backends.mkldnn.enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def json_safe(o):
    """Strict JSON (serde_json rejects NaN / Infinity): non-finite floats become strings."""
    if isinstance(o, float) and not np.isfinite(o):
        return "inf" if o > 0 else ("-inf" if o < 0 else "nan")
    if isinstance(o, dict):  # drop run-dependent bookkeeping (output path, a set's iteration order)
        return {str(k): json_safe(v) for k, v in o.items() if k not in ("_name_or_path", "_use_default_values")}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if isinstance(o, (str, int, bool)) or o is None or isinstance(o, float):
        return o
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return json_safe(float(o))
    if isinstance(o, torch.dtype):
        return str(o).replace("torch.", "")
    return str(o)


TENSOR_DOCS = {
    "prompt_ids": "tokenizer(prompt, padding='max_length', max_length=77, truncation=True).input_ids",
    "negative_ids": "same for the negative prompt",
    "prompt_ids_2": "same with tokenizer_2 (pads with '!')",
    "negative_ids_2": "same with tokenizer_2",
    "prompt_embeds": "encode_prompt(prompt) (sd15/sd21: text_encoder last_hidden_state; sdxl: cat of both encoders' hidden_states[-2])",
    "negative_embeds": "encode_prompt(negative_prompt), same layout",
    "pooled_prompt_embeds": "sdxl: text_encoder_2 text_embeds for the prompt",
    "negative_pooled_prompt_embeds": "sdxl: text_encoder_2 text_embeds for the negative prompt",
    "add_time_ids": "sdxl: [orig_h, orig_w, crop_top, crop_left, target_h, target_w]",
    "init_latents": "RAW N(0,1) noise, torch.Generator('cpu').manual_seed(42); pipelines multiply by init_noise_sigma",
    "unet_in": "scale_model_input(init_latents * init_noise_sigma, unet_t) (Euler)",
    "unet_t": "first Euler timestep",
    "unet_out": "unet(unet_in, unet_t, prompt_embeds[, text_embeds=pooled, time_ids=add_time_ids]), batch 1, no CFG",
    "latents_euler": "StableDiffusion(XL)Pipeline, Euler, 4 steps, cfg 7.5, negative prompt, output_type='latent'",
    "latents_euler_steps": "latents after each Euler step (callback_on_step_end); last == latents_euler",
    "euler_unet_inputs": "every UNet call of the Euler run: [step, batch(uncond, cond), 4, 8, 8] scaled model input",
    "euler_unet_outputs": "matching raw UNet outputs (before CFG combination)",
    "image_euler": "same Euler run, output_type='np': NHWC float32 in [0, 1] = clamp(decode/2 + 0.5, 0, 1)",
    "vae_decode_in": "latents_euler / scaling_factor",
    "vae_decode_out": "vae.decode(vae_decode_in).sample, raw NCHW (not clamped)",
    "ancestral_noise": "per-step noise fed to EulerAncestralDiscreteScheduler.step (step i uses [i])",
    "latents_euler_a": "Euler ancestral run with ancestral_noise",
    "latents_euler_a_steps": "latents after each Euler-a step",
    "latents_dpmpp2m_karras": "DPMSolverMultistepScheduler(dpmsolver++, order 2, karras sigmas) run",
    "latents_dpmpp2m_karras_steps": "latents after each DPM++ step",
    "latents_sdxl_cfg0": "sdxl: Euler, 1 step, guidance_scale 0 (no CFG)",
    "img2img_image": "uint8 HWC init image: R = 4x, G = 4y, B = 128",
    "img2img_image_in": "VAE encoder input: NCHW float32 in [-1, 1]",
    "img2img_posterior_mean": "vae.encode(img2img_image_in).latent_dist.mean (unscaled)",
    "img2img_posterior_std": "latent_dist.std = exp(0.5 * clamp(logvar, -30, 20))",
    "img2img_posterior_noise": "N(0,1) noise used for the posterior sample",
    "img2img_init_latents": "scaling_factor * (mean + std * posterior_noise), as captured in the pipeline",
    "img2img_noise": "noise passed to scheduler.add_noise",
    "img2img_noised_latents": "add_noise(img2img_init_latents, img2img_noise, first img2img timestep) = init + sigma * noise",
    "latents_img2img": "StableDiffusionImg2ImgPipeline, strength 0.5, 4 steps (2 run), Euler, cfg 7.5",
    "latents_img2img_steps": "latents after each img2img step",
}


def describe(tensors):
    return {
        k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""), "doc": TENSOR_DOCS.get(k, "")}
        for k, v in sorted(tensors.items())
    }


def generate_arch(arch, out_root, vocab, merges, weights_from=None):
    out = out_root / arch
    out.mkdir(parents=True, exist_ok=True)
    model_dir = out / "model"
    pipe = build_pipeline(arch, vocab, merges)
    if weights_from is not None:
        # Weight init itself depends on the CPU kernels (vectorised RNG fills), so an unpinned run
        # takes the committed weights to measure only the drift of the computations.
        cls = StableDiffusionXLPipeline if arch == "sdxl" else StableDiffusionPipeline
        src = cls.from_pretrained(Path(weights_from) / arch / "model", local_files_only=True, dtype=torch.float32)
        names = ["unet", "vae", "text_encoder"] + (["text_encoder_2"] if arch == "sdxl" else [])
        for name in names:
            getattr(pipe, name).load_state_dict(getattr(src, name).state_dict())
    pipe = save_and_reload(pipe, arch, model_dir, vocab, merges)
    pipe.set_progress_bar_config(disable=True)

    tensors, meta = make_references(pipe, arch)

    doc = {
        "arch": arch,
        "prompt": PROMPT,
        "negative_prompt": NEGATIVE,
        "height": HEIGHT,
        "width": WIDTH,
        "steps": STEPS,
        "guidance_scale": GUIDANCE,
        "max_length": MAX_LEN,
        "init_latents": f"torch.randn((1,4,{HEIGHT // 8},{WIDTH // 8}), generator=torch.Generator('cpu').manual_seed({LATENT_SEED})), RAW standard normal; the pipeline multiplies it by init_noise_sigma",
        "init_noise_sigma": meta["unet_eval"]["init_noise_sigma"],
        "noise_sources": {
            "note": "all drawn with ATEN_CPU_CAPABILITY=default, i.e. ATen's scalar normal_fill (the AVX2 path gives values up to ~1.2e-6 apart)",
            "init_latents": f"torch.randn((1,4,8,8), generator=torch.Generator('cpu').manual_seed({LATENT_SEED}))",
            "ancestral_noise": f"torch.randn(({STEPS},1,4,8,8), generator=torch.Generator('cpu').manual_seed({ANCESTRAL_SEED}))",
            "img2img": f"g = torch.Generator('cpu').manual_seed({IMG2IMG_SEED}); img2img_posterior_noise = torch.randn((1,4,8,8), generator=g); img2img_noise = torch.randn((1,4,8,8), generator=g)",
        },
        "vae_scaling_factor": pipe.vae.config.scaling_factor,
        "vae_scale_factor": pipe.vae_scale_factor,
        "unet_config": dict(pipe.unet.config),
        "vae_config": dict(pipe.vae.config),
        "text_encoder_config": pipe.text_encoder.config.to_dict(),
        "tokenizer": {
            "pad_token": pipe.tokenizer.pad_token,
            "pad_token_id": pipe.tokenizer.pad_token_id,
            "bos_token_id": pipe.tokenizer.bos_token_id,
            "eos_token_id": pipe.tokenizer.eos_token_id,
            "vocab_size": len(vocab),
            "n_merges": len(merges),
        },
        "scheduler_config": dict(pipe.scheduler.config),
        "unet_eval": meta["unet_eval"],
        "runs": meta["runs"],
        "tokenizer_cases": meta["tokenizer_cases"],
        "versions": versions(),
    }
    if arch == "sdxl":
        doc["text_encoder_2_config"] = pipe.text_encoder_2.config.to_dict()
        doc["tokenizer_2"] = {"pad_token": pipe.tokenizer_2.pad_token, "pad_token_id": pipe.tokenizer_2.pad_token_id}
        doc["sdxl"] = {
            "original_size": [HEIGHT, WIDTH],
            "crops_coords_top_left": [0, 0],
            "target_size": [HEIGHT, WIDTH],
            "add_time_ids": tensors["add_time_ids"].flatten().tolist(),
            "prompt_embeds": "cat(text_encoder hidden_states[-2], text_encoder_2 hidden_states[-2]) on the last dim",
            "pooled_prompt_embeds": "text_encoder_2 text_embeds (projection of the final-layer-normed hidden state at the first eos)",
            "force_zeros_for_empty_prompt": pipe.config.force_zeros_for_empty_prompt,
        }

    if arch in ("sd15", "sd21", "sdxl"):
        single = out / "single_file.safetensors"
        dtype = SINGLE_FILE_DTYPE
        ckpt = write_single_file(pipe, arch, model_dir, single, dtype)
        doc["single_file"] = {
            "path": "single_file.safetensors",
            "dtype": str(dtype).replace("torch.", ""),
            "n_tensors": len(ckpt),
            "layout": "original Stability/LDM keys: model.diffusion_model.*, first_stage_model.*, "
            + {
                "sd15": "cond_stage_model.transformer.text_model.* (HF CLIP)",
                "sd21": "cond_stage_model.model.* (OpenCLIP, fused attn.in_proj_weight/bias)",
                "sdxl": "conditioner.embedders.0.transformer.text_model.* (HF CLIP), conditioner.embedders.1.model.* (OpenCLIP, fused in_proj, text_projection transposed)",
            }[arch],
            "verification": verify_single_file(arch, single, model_dir, pipe, tensors),
        }

    for k, v in tensors.items():
        assert torch.isfinite(v.float()).all(), k
    save_file({k: v.contiguous() for k, v in tensors.items()}, out / "reference.safetensors", metadata={"format": "pt"})
    doc["tensors"] = describe(tensors)
    with open(out / "reference.json", "w", encoding="utf-8") as f:
        json.dump(json_safe(doc), f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    return doc


def compare_dirs(a, b):
    """Bitwise comparison of every safetensors file under two generated trees."""
    a, b = Path(a), Path(b)
    worst = 0.0
    n = 0
    for fa in sorted(a.rglob("*.safetensors")):
        fb = b / fa.relative_to(a)
        ta, tb = load_file(fa), load_file(fb)
        assert set(ta) == set(tb), fa
        for k in ta:
            n += 1
            if not torch.equal(ta[k], tb[k]):
                d = float((ta[k].double() - tb[k].double()).abs().max())
                scale = float(ta[k].double().abs().max())
                worst = max(worst, d)
                print(f"DIFF {fa.relative_to(a)}:{k} max_abs={d:.3g} (max|x|={scale:.3g}, rel={d / max(scale, 1e-30):.3g})")
    for fa in sorted(a.rglob("*.json")) + sorted(a.rglob("*.txt")):
        fb = b / fa.relative_to(a)
        if fa.read_bytes() != fb.read_bytes():
            print(f"DIFF {fa.relative_to(a)} (text differs)")
    print(f"compared {n} tensors; worst max_abs diff = {worst:g}")
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--arch", nargs="*", default=["sd15", "sd21", "sdxl"])
    ap.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"))
    ap.add_argument("--weights-from", type=Path, help="reuse the model weights of an earlier output tree")
    args = ap.parse_args()
    if args.compare:
        sys.exit(0 if compare_dirs(*args.compare) == 0.0 else 1)
    if not UNPINNED:
        assert os.environ.get("ATEN_CPU_CAPABILITY") == "default", "run with ATEN_CPU_CAPABILITY=default"
        assert os.environ.get("MKL_CBWR") == "COMPATIBLE", "run with MKL_CBWR=COMPATIBLE"
    merges = learn_bpe(BPE_CORPUS, N_MERGES)
    vocab = build_vocab(merges)
    for arch in args.arch:
        doc = generate_arch(arch, args.out, vocab, merges, args.weights_from)
        print(f"{arch}: {len(doc['tensors'])} reference tensors written to {args.out / arch}")


if __name__ == "__main__":
    main()
