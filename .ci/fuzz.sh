#!/usr/bin/env bash
# Fuzzing (cargo-fuzz / libFuzzer) of the hostile-input parsers, each for a bounded time.
# Stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its flags; no sanitizer (the code under test
# is safe Rust, so coverage guidance is what finds panics, hangs and runaway allocations).
# Built with debug assertions (-a), so integer overflow and the targets' own assertions are caught.
# A crash fails CI; its input is then in fuzz/artifacts/<target>/ — add it to fuzz/seeds/<target>/
# and fix the bug, so it is replayed forever.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
cargo fuzz build -s none -O -a
for t in decode_image edit_instruction prompt oauth_params multipart_edit safetensors_header; do
  corpus=$(mktemp -d)
  log=$(mktemp)
  if ! cargo fuzz run "$t" -s none -O -a "$corpus" "seeds/$t" -- -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz target $t found a crash: see fuzz/artifacts/$t/"
    exit 1
  fi
  echo "fuzz $t: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)s, no crash"
  rm -rf "$corpus" "$log"
done
