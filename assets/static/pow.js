// Pictor's bot check: finds a nonce n such that SHA-256(challenge + ":" + n) starts with `bits`
// zero bits, for every form that carries a `pow_challenge` field. It starts when the page loads,
// so it is usually done before the person has finished typing; a submit waits for it.
(function () {
  "use strict";
  var K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
  var W = new Uint32Array(64);

  // The first 32-bit word of SHA-256 of an ASCII message shorter than 56 bytes (one block).
  function firstWord(bytes, len) {
    var i;
    for (i = 0; i < 16; i++) W[i] = 0;
    for (i = 0; i < len; i++) W[i >> 2] |= bytes[i] << (24 - 8 * (i & 3));
    W[len >> 2] |= 0x80 << (24 - 8 * (len & 3));
    W[15] = len * 8;
    for (i = 16; i < 64; i++) {
      var x = W[i - 15], y = W[i - 2];
      var s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      var s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
    }
    var a = 0x6a09e667, b = 0xbb67ae85, c = 0x3c6ef372, d = 0xa54ff53a;
    var e = 0x510e527f, f = 0x9b05688c, g = 0x1f83d9ab, h = 0x5be0cd19;
    for (i = 0; i < 64; i++) {
      var S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      var t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      var S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      var t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    return (a + 0x6a09e667) >>> 0;
  }

  function solve(challenge, bits, done) {
    var prefix = challenge + ":";
    var bytes = new Uint8Array(64);
    for (var i = 0; i < prefix.length; i++) bytes[i] = prefix.charCodeAt(i);
    var mask = bits >= 32 ? 0xffffffff : ~(0xffffffff >>> bits) >>> 0;
    var nonce = 0;
    function batch() {
      var end = nonce + 50000;
      for (; nonce < end; nonce++) {
        var s = String(nonce), len = prefix.length + s.length;
        for (var j = 0; j < s.length; j++) bytes[prefix.length + j] = s.charCodeAt(j);
        if ((firstWord(bytes, len) & mask) === 0) { done(s); return; }
      }
      setTimeout(batch, 0);
    }
    batch();
  }

  document.querySelectorAll("form").forEach(function (form) {
    var field = form.querySelector("input[name=pow_challenge]");
    var out = form.querySelector("input[name=pow_nonce]");
    if (!field || !out) return;
    var status = form.querySelector(".pow-status");
    var button = form.querySelector("button[type=submit]");
    var waiting = false;
    solve(field.value, parseInt(field.getAttribute("data-bits"), 10) || 16, function (nonce) {
      out.value = nonce;
      if (status) status.textContent = status.getAttribute("data-done") || "Bot check done.";
      if (waiting) form.submit();
    });
    form.addEventListener("submit", function (ev) {
      if (out.value) return;
      ev.preventDefault();
      waiting = true;
      if (button) button.disabled = true;
      if (status) status.textContent = status.getAttribute("data-finishing") || "Finishing the bot check…";
    });
  });
})();
