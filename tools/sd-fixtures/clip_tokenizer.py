"""Reference token ids for Pictor's built-in CLIP tokenizer (the one single-file checkpoints use).

The reference is OpenAI CLIP's own tokenizer as open_clip ships it (`SimpleTokenizer`, from the
same `bpe_simple_vocab_16e6.txt.gz` Pictor's `assets/clip/merges.txt` is cut from). Writes
`crates/pictor-diffusion/tests/fixtures/diffusion/clip_tokenizer.json`. Run by hand:

    /tmp/sdref/bin/pip install open_clip_torch
    /tmp/sdref/bin/python tools/sd-fixtures/clip_tokenizer.py
"""
import gzip
import json
import pathlib
import importlib.metadata as md

from open_clip.tokenizer import SimpleTokenizer, default_bpe

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The committed asset must be exactly the first 48894 merges of open_clip's file.
lines = gzip.open(default_bpe()).read().decode("utf-8").split("\n")[1 : 49152 - 256 - 2 + 1]
asset = (ROOT / "assets/clip/merges.txt").read_text(encoding="utf-8").split("\n")
assert asset[0] == "#version: 0.2" and asset[1 : 1 + len(lines)] == lines, "merges.txt differs"

tok = SimpleTokenizer()
texts = [
    "a photo of an astronaut riding a horse on mars",
    "A Red CAR parked by the sea, golden hour, 35mm, highly detailed",
    "portrait of a woman with curly hair and freckles, oil painting",
    "cyberpunk city at night!!! neon lights, rain; reflections",
    "a bowl of ramen with eggs & chopsticks",
    "it's a dog's life: they're running, we've won, I'm here, you'll see, he'd go",
    "numbers 1234 and 3.14159 and 2026-11-24",
    "emoji 🐱 and café, naïve, Straße, ÉCOLE",
    "日本の桜 and 北京",
    "   lots   of\twhitespace\nand newlines   ",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "(masterpiece:1.2), best quality, [blurry], {ugly}",
    "",
    "!!!",
    "a " * 100,
]
cases = []
for t in texts:
    ids = tok(t, context_length=77)[0].tolist()  # sot, tokens (truncated), eot, zeros
    cases.append({"text": t, "ids": ids})
out = {
    "reference": f"open_clip {md.version('open_clip_torch')} SimpleTokenizer (OpenAI CLIP BPE), ftfy {md.version('ftfy')}",
    "note": "open_clip pads with 0 ('!'); Pictor pads with the configured token, so only the ids up to and including <|endoftext|> are compared",
    "cases": cases,
}
path = ROOT / "crates/pictor-diffusion/tests/fixtures/diffusion/clip_tokenizer.json"
path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
print("wrote", path, len(cases), "cases")
