#!/usr/bin/env bash
# The GPU check (about 6 minutes on one H100/H200). On the GPU machine, from the project root,
# with the folder tools/gpu/build.sh wrote (target/nvidia/gpu) copied to .gpu/:
#
#   bash .gpu/check.sh                 # results in $OUT (or /tmp/gpu-check): gpu-table.md, logs
#
# 1. `pictor-cuda gpu`: the GPU, its compute capability, the kernels' architecture.
# 2. The diffusion parity checks on the GPU (PICTOR_TEST_DEVICE=cuda), against the diffusers
#    references the CPU checks use.
# 3. diffusers beside it (PyTorch from that machine): a full-size random SD 1.5 pipeline,
#    float32 and float16 per step and for a 1-step picture at 512² (diffusers_sd15.py).
# 4. Pictor in its server with the same pipeline: the first job after a start on a fresh
#    machine (nothing cached), a second start (the driver's cache warm), warm 1-step jobs and a
#    21-step job; times from the jobs' own started_at/finished_at.
# The table goes to $OUT/gpu-table.md.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
G=$(cd "$(dirname "$0")" && pwd)
W=/tmp/pictor-gpu-check
rm -rf "$W"; mkdir -p "$W"
# The machine's CUDA libraries (PyTorch's wheels carry cuBLAS, cuRAND, NVRTC, the runtime).
mkdir -p "$W/libs"
for d in $(find / -xdev \( -name 'libcublas.so.13*' -o -name 'libcurand.so.10*' -o -name 'libnvrtc*.so.13*' \
           -o -name 'libcudart.so.13*' \) -print 2>/dev/null | xargs -r -n1 dirname | sort -u); do
  for f in "$d"/lib*.so.*; do ln -sf "$f" "$W/libs/$(basename "$f")"; done
done
export LD_LIBRARY_PATH=$W/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -c "import lzma, shutil, sys; [shutil.copyfileobj(lzma.open(f'$G/{n}.xz'), open(f'$W/{n}', 'wb')) for n in ('pictor-cuda', 'parity')]"
chmod +x "$W/pictor-cuda" "$W/parity"
P=$W/pictor-cuda
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# A fresh machine: nothing compiled yet.
rm -rf ~/.nv/ComputeCache
"$P" gpu 2>&1 | tee -a "$OUT/gpu.txt"

echo "== parity on the GPU"
PICTOR_TEST_DEVICE=cuda PICTOR_TEST_FIXTURES=$PWD/crates/pictor-diffusion/tests/fixtures \
  timeout 240 "$W/parity" --test-threads 1 2>&1 | tee "$OUT/parity.txt" | grep -E '^test |test result' 

echo "== diffusers"
cp "$G/sd_architectures.json" "$G/merges.txt" "$W/" 2>/dev/null
cp "$G/diffusers_sd15.py" "$W/"
timeout 240 python3 "$W/diffusers_sd15.py" "$W/sd15" 2>"$OUT/diffusers.err" | tee "$OUT/diffusers.jsonl"

echo "== Pictor in its server"
D=$W/data
"$P" --data-dir "$D" --init models add sd15 "$W/sd15/model" --json > "$OUT/add.json" 2>&1
cat > "$W/config.toml" <<TOML
[diffusion.fast]
model = "sd15"
steps = 1
guidance = 7.5
size = 512
sampler = "euler"
[diffusion.artist]
model = "sd15"
steps = 21
guidance = 7.5
size = 512
sampler = "euler"
TOML
"$P" --data-dir "$D" user add --email gpu@example.com --credits 1000 --pro --json >/dev/null
KEY=$("$P" --data-dir "$D" key issue --email gpu@example.com --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
jobs() { # $1: label; then tiers to run in order
  local label=$1; shift
  python3 - "$label" "$KEY" "$@" <<'PY' | tee -a "$OUT/jobs.jsonl"
import json, sys, time, urllib.request
label, key, tiers = sys.argv[1], sys.argv[2], sys.argv[3:]
base = "http://127.0.0.1:18080/api/pictor/v1"
def call(path, body=None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None,
                                 headers={"X-API-Key": key, "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))
for i, tier in enumerate(tiers):
    job = call("/generate", {"prompt": "a red fox in the snow", "model": tier, "seed": 42 + i})["job_id"]
    while True:
        j = call(f"/jobs/{job}?wait=60")
        if j["status"] in ("done", "failed"):
            break
    secs = (j["finished_at"] - j["started_at"]) / 1000 if j.get("started_at") else None
    print(json.dumps({"run": label, "tier": tier, "status": j["status"], "seconds": secs,
                      "error": j.get("error")}), flush=True)
PY
}
serve() {
  "$P" --data-dir "$D" --config "$W/config.toml" serve --listen 127.0.0.1:18080 >"$OUT/serve-$1.log" 2>&1 &
  SERVER=$!
  local t0 t1
  t0=$(date +%s%N)
  for _ in $(seq 1 600); do curl -sf http://127.0.0.1:18080/healthz >/dev/null 2>&1 && break; sleep 0.2; done
  t1=$(date +%s%N)
  echo "{\"run\": \"$1\", \"ready_after_s\": $(( (t1 - t0) / 1000000 ))e-3}" | tee -a "$OUT/jobs.jsonl"
}
serve cold;  jobs cold fast fast fast fast artist
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee "$OUT/memory.txt"
curl -s http://127.0.0.1:18080/metrics | grep -E '^pictor_(gpu|model)_memory' | tee -a "$OUT/memory.txt"
kill $SERVER; wait $SERVER 2>/dev/null
serve warm-cache; jobs warm-cache fast fast
kill $SERVER; wait $SERVER 2>/dev/null

python3 - "$OUT" <<'PY'
import json, sys, statistics
out = sys.argv[1]
d = [json.loads(l) for l in open(f"{out}/diffusers.jsonl") if l.startswith("{") and "engine" in l]
j = [json.loads(l) for l in open(f"{out}/jobs.jsonl") if l.startswith("{")]
gpu = open(f"{out}/gpu.txt").readline().strip()
def jobs(run, tier): return [x["seconds"] for x in j if x.get("run") == run and x.get("tier") == tier and x.get("seconds")]
cold = jobs("cold", "fast"); warm = cold[1:] + jobs("warm-cache", "fast")[1:]
art = jobs("cold", "artist")
ready = {x["run"]: x["ready_after_s"] for x in j if "ready_after_s" in x}
step = (art[0] - statistics.median(warm)) / 20 if art and warm else None
dd = {x["dtype"]: x for x in d}
f32, f16 = dd.get("torch.float32", {}), dd.get("torch.float16", {})
rows = [
    ("one denoising step (batch of 2 for CFG)", f"{step:.3f} s" if step else "—", f32.get("per_step_s"), f16.get("per_step_s")),
    ("1-step picture, warm (Pictor: in the server, PNG encoded)", f"{statistics.median(warm):.3f} s" if warm else "—", f32.get("one_step_picture_s"), f16.get("one_step_picture_s")),
    ("first job after a start, fresh machine / driver cache warm", f"{cold[0]:.2f} s / {jobs('warm-cache','fast')[0]:.2f} s" if cold and jobs('warm-cache','fast') else "—", "—", "—"),
    ("server ready after start, fresh machine / cache warm", f"{ready.get('cold', 0):.1f} s / {ready.get('warm-cache', 0):.1f} s", "—", "—"),
    ("peak GPU memory (diffusers: torch's max allocated)", open(f"{out}/memory.txt").readline().strip(), f32.get("mem_gb"), f16.get("mem_gb")),
]
lines = [f"GPU: {gpu}", "", "| SD 1.5 architecture, 512², CFG 7.5, random weights | Pictor (`cuda`, float32) | diffusers float32 | diffusers float16 |", "|---|---|---|---|"]
lines += [f"| {a} | {b} | {c if c is not None else '—'} | {e if e is not None else '—'} |" for a, b, c, e in rows]
parity = [l for l in open(f"{out}/parity.txt") if l.startswith("test result")]
lines += ["", "parity on the GPU: " + (parity[-1].strip() if parity else "did not finish")]
open(f"{out}/gpu-table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
