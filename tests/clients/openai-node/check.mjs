// The official `openai` npm package against a real Pictor server (tests/openai_api.rs runs it).
// OPENAI_BASE_URL is {server}/openai/v1; PICTOR_KEY a key with credits, PICTOR_BROKE_KEY one without.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import OpenAI, { toFile } from "openai";

function crc32(buf) {
  let c, crc = 0xffffffff;
  for (const b of buf) {
    c = (crc ^ b) & 0xff;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    crc = (crc >>> 8) ^ c;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** An RGB picture, or RGBA with alpha(x, y) (OpenAI's masks: transparent = change). */
function png(w, h, alpha) {
  const chunk = (type, data) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ch = alpha ? 4 : 3;
  const raw = Buffer.alloc((w * ch + 1) * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = y * (w * ch + 1) + 1 + x * ch;
      raw[o] = (x * 9) % 256; raw[o + 1] = (y * 7) % 256; raw[o + 2] = 90;
      if (alpha) raw[o + 3] = alpha(x, y);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; ihdr[9] = alpha ? 6 : 2;
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

const sizeOf = (b) => {
  assert.equal(b.subarray(0, 8).toString("hex"), "89504e470d0a1a0a", "not a PNG");
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
};
const b64 = (r) => Buffer.from(r.data[0].b64_json, "base64");

const client = new OpenAI({ apiKey: process.env.PICTOR_KEY }); // base URL from OPENAI_BASE_URL

let r = await client.images.generate({ prompt: "a lighthouse at dusk", model: "dall-e-2", size: "1536x1024", response_format: "b64_json" });
const [w, h] = sizeOf(b64(r));
assert.ok(Math.abs(w / h - 1.5) < 0.02, `${w}x${h}`);

r = await client.images.edit({ image: await toFile(png(32, 24), "photo.png", { type: "image/png" }), prompt: "make it black and white", response_format: "b64_json" });
assert.deepEqual(sizeOf(b64(r)), [32, 24]);

// With a mask: its transparent left half is the area to change.
r = await client.images.edit({
  image: await toFile(png(32, 24), "photo.png", { type: "image/png" }),
  mask: await toFile(png(32, 24, (x) => (x < 16 ? 0 : 255)), "mask.png", { type: "image/png" }),
  prompt: "make it black and white", response_format: "b64_json",
});
assert.deepEqual(sizeOf(b64(r)), [32, 24]);

const ids = (await client.models.list()).data.map((m) => m.id);
assert.ok(ids.includes("dall-e-3") && ids.includes("fast"), String(ids));

async function expect(cls, call, code, param) {
  try {
    await call();
  } catch (e) {
    assert.ok(e instanceof cls, `${cls.name} expected, got ${e}`);
    const body = e.error ?? {};
    if (code) assert.equal(e.code ?? body.code, code, JSON.stringify(body));
    if (param) assert.equal(e.param ?? body.param, param, JSON.stringify(body));
    return;
  }
  throw new Error(`${cls.name} expected`);
}

const wrong = new OpenAI({ apiKey: "vx_not_a_key" });
await expect(OpenAI.AuthenticationError, () => wrong.images.generate({ prompt: "x" }), "invalid_api_key");
const broke = new OpenAI({ apiKey: process.env.PICTOR_BROKE_KEY, maxRetries: 0 });
await expect(OpenAI.RateLimitError, () => broke.images.generate({ prompt: "x" }), "insufficient_quota");
await expect(OpenAI.BadRequestError, () => client.images.generate({ prompt: "x", size: "huge" }), null, "size");
await expect(OpenAI.BadRequestError, async () => client.images.edit({
  image: await toFile(png(32, 24), "p.png", { type: "image/png" }),
  mask: await toFile(png(16, 16, () => 0), "m.png", { type: "image/png" }),
  prompt: "make it black and white",
}), null, "mask");
console.log("openai node: all checks passed");
