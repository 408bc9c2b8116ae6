"""Re-lays the parity fixtures' SD 1.5 and SDXL folders as today's tools save a pipeline, into
crates/pictor-diffusion/tests/fixtures/diffusion/layouts/{sd15,sdxl}/:

* the UNet sharded: `diffusion_pytorch_model-0000N-of-00003.safetensors` with
  `diffusion_pytorch_model.safetensors.index.json` (what diffusers writes for any component over
  its `max_shard_size`, every full-precision SDXL UNet among them), no unsharded file;
* each text encoder as transformers 5 saves a `CLIPTextModel`: tensor names without the
  `text_model.` prefix, sharded in two (`model-00001-of-00002.safetensors`,
  `model.safetensors.index.json`);
* each tokenizer as `tokenizer.json` only (the `tokenizers` library's file, merges as pairs as
  tokenizers >= 0.20 writes them), no `vocab.json` / `merges.txt`.

The tensors are the same bytes as the source folder's, so the parity test can hold the new
layout to the same reference outputs and to bit-identical results. Needs only numpy, safetensors
and tokenizers (no torch):

    python3 -m venv /tmp/lay && /tmp/lay/bin/pip install safetensors numpy tokenizers
    /tmp/lay/bin/python tools/sd-fixtures/layouts.py
"""

import json
import pathlib
import shutil

from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer
from tokenizers.models import BPE

ROOT = pathlib.Path(__file__).resolve().parents[2] / "crates/pictor-diffusion/tests/fixtures/diffusion"


def shard(tensors, out_dir, stem, count, total_name):
    """Splits `tensors` (in name order) into `count` shards of about equal size."""
    names = sorted(tensors)
    total = sum(tensors[n].nbytes for n in names)
    per = total / count
    shards, current, size = [], {}, 0
    for n in names:
        if current and size + tensors[n].nbytes > per and len(shards) < count - 1:
            shards.append(current)
            current, size = {}, 0
        current[n] = tensors[n]
        size += tensors[n].nbytes
    shards.append(current)
    assert len(shards) == count, (stem, len(shards))
    weight_map = {}
    for i, part in enumerate(shards, 1):
        name = f"{stem}-{i:05d}-of-{count:05d}.safetensors"
        save_file(part, str(out_dir / name), metadata={"format": "pt"})
        for n in part:
            weight_map[n] = name
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / total_name).write_text(json.dumps(index, indent=2) + "\n")


def fast_tokenizer(src, dst):
    vocab = json.loads((src / "vocab.json").read_text())
    merges = [tuple(line.split(" ")) for line in (src / "merges.txt").read_text().splitlines()[1:] if line]
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, end_of_word_suffix="</w>", unk_token="<|endoftext|>"))
    tok.save(str(dst / "tokenizer.json"))
    for f in ["tokenizer_config.json", "special_tokens_map.json"]:
        if (src / f).exists():
            shutil.copy(src / f, dst / f)


def relayout(arch):
    src = ROOT / arch / "model"
    out = ROOT / "layouts" / arch
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copy(src / "model_index.json", out / "model_index.json")
    for c in ["scheduler", "vae"]:
        shutil.copytree(src / c, out / c)
    (out / "unet").mkdir()
    shutil.copy(src / "unet/config.json", out / "unet/config.json")
    unet = load_file(str(src / "unet/diffusion_pytorch_model.safetensors"))
    shard(unet, out / "unet", "diffusion_pytorch_model", 3, "diffusion_pytorch_model.safetensors.index.json")
    for enc, tok in [("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")]:
        if not (src / enc).exists():
            continue
        (out / enc).mkdir()
        shutil.copy(src / enc / "config.json", out / enc / "config.json")
        weights = load_file(str(src / enc / "model.safetensors"))
        stripped = {k.removeprefix("text_model."): v for k, v in weights.items()}
        assert not any(k.startswith("text_model.") for k in stripped)
        shard(stripped, out / enc, "model", 2, "model.safetensors.index.json")
        (out / tok).mkdir()
        fast_tokenizer(src / tok, out / tok)
    print(arch, sum(f.stat().st_size for f in out.rglob("*") if f.is_file()), "bytes")


if __name__ == "__main__":
    for arch in ["sd15", "sdxl"]:
        relayout(arch)
