"""The official `openai` Python package against a real Pictor server (tests/openai_api.rs runs it).
OPENAI_BASE_URL is {server}/openai/v1; PICTOR_KEY a key with credits, PICTOR_BROKE_KEY one without."""
import base64
import io
import os
import struct
import zlib

import openai


def png(w, h, alpha=None):
    """An RGB picture, or RGBA with alpha(x, y) (OpenAI's masks: transparent = change)."""
    def px(x, y):
        rgb = ((x * 9) % 256, (y * 7) % 256, 90)
        return rgb if alpha is None else rgb + (alpha(x, y),)
    raw = b"".join(b"\x00" + bytes(v for x in range(w) for v in px(x, y)) for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    color = 2 if alpha is None else 6
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def named(data, name):
    f = io.BytesIO(data)
    f.name = name
    return f


def size_of(png_bytes):
    assert png_bytes[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", png_bytes[16:24])


client = openai.OpenAI(api_key=os.environ["PICTOR_KEY"])  # base URL from OPENAI_BASE_URL

r = client.images.generate(prompt="a lighthouse at dusk", model="dall-e-2", size="1536x1024",
                           response_format="b64_json")
w, h = size_of(base64.b64decode(r.data[0].b64_json))
assert abs(w / h - 1.5) < 0.02, (w, h)

r = client.images.generate(prompt="a red bicycle", size="1024x1024")
assert r.data[0].url.startswith("http"), r.data[0]
import urllib.request
w, h = size_of(urllib.request.urlopen(r.data[0].url).read())
assert w == h, (w, h)

photo = named(png(32, 24), "photo.png")
r = client.images.edit(image=photo, prompt="make it black and white", response_format="b64_json")
assert size_of(base64.b64decode(r.data[0].b64_json)), r

# With a mask: its transparent left half is the area to change.
mask = named(png(32, 24, alpha=lambda x, y: 0 if x < 16 else 255), "mask.png")
r = client.images.edit(image=named(png(32, 24), "photo.png"), mask=mask, prompt="make it black and white",
                       response_format="b64_json")
assert size_of(base64.b64decode(r.data[0].b64_json)) == (32, 24), r

ids = [m.id for m in client.models.list().data]
assert "dall-e-3" in ids and "fast" in ids, ids

def expect(exc, call, code=None, param=None):
    try:
        call()
    except exc as e:
        body = e.body if isinstance(e.body, dict) else {}
        body = body.get("error", body)
        assert code is None or e.code == code or body.get("code") == code, (code, e.body)
        assert param is None or body.get("param") == param, (param, e.body)
        return
    raise AssertionError(f"{exc.__name__} expected")

wrong = openai.OpenAI(api_key="vx_not_a_key")
expect(openai.AuthenticationError, lambda: wrong.images.generate(prompt="x"), "invalid_api_key")
broke = openai.OpenAI(api_key=os.environ["PICTOR_BROKE_KEY"], max_retries=0)
expect(openai.RateLimitError, lambda: broke.images.generate(prompt="x"), "insufficient_quota")
expect(openai.BadRequestError, lambda: client.images.generate(prompt="x", size="huge"), param="size")
expect(openai.BadRequestError, lambda: client.images.generate(prompt="x", n=9), param="n")
expect(openai.BadRequestError, lambda: client.images.edit(
    image=named(png(32, 24), "p.png"), mask=named(png(16, 16, alpha=lambda x, y: 0), "m.png"),
    prompt="make it black and white"), param="mask")
print("openai python: all checks passed")
