#!/usr/bin/env bash
# Clients generated from the OpenAPI document a real server serves, used against that server with
# real keys: openapi-python-client (Python), openapi-typescript + openapi-fetch (TypeScript) and
# progenitor (Rust, from `openapi.json?multipart=false`: progenitor cannot send multipart forms).
# Each generator must run without a warning about the document; each client then creates a
# generation, long-polls it to `done`, downloads the PNG, reads `/me`, makes an edit with a file
# upload, reads the history, and reads the `error_code` of a refused job (`job_busy`) through the
# generated types. The server renders with a 1 s delay so that the second job meets the first.
# Versions are pinned (tests/clients/*: requirements.txt, package-lock.json, Cargo.lock).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Always the binary of this tree (a no-op when it is up to date).
(cd "$ROOT" && cargo build --quiet)
BIN=$ROOT/target/debug/pictor
WORK=$(mktemp -d)
DATA=$WORK/data
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
API="http://127.0.0.1:$PORT/api/pictor"

key_for() {
  "$BIN" --data-dir "$DATA" --init user add --email "$1@example.com" --credits 100 --json >/dev/null
  "$BIN" --data-dir "$DATA" key issue --email "$1@example.com" 2>/dev/null
}
PY_KEY=$(key_for python)
TS_KEY=$(key_for typescript)
RS_KEY=$(key_for rust)
README_KEY=$(key_for readme)

PICTOR_DEBUG_RENDER_DELAY_MS=1000 PICTOR_LOG=warn "$BIN" --data-dir "$DATA" serve \
  --listen "127.0.0.1:$PORT" >/dev/null 2>"$WORK/server.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 1 100); do
  curl -fsS "$API/openapi.json" -o "$WORK/openapi.json" 2>/dev/null && break
  sleep 0.2
done
curl -fsS "$API/openapi.json?multipart=false" -o "$WORK/openapi-plain.json"

# Fails when a generator's output mentions a warning or an error.
no_warnings() {
  local name=$1 log=$2
  cat "$log"
  if grep -Eiq 'warn|error|unable|skipp' "$log"; then
    echo "$name warned about the document (above)"
    exit 1
  fi
}

echo "== python: openapi-python-client"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q -r tests/clients/python/requirements.txt
# ruff on PATH: the generator formats its output with it (and warns when it is missing).
PATH="$WORK/venv/bin:$PATH" openapi-python-client generate --url "$API/openapi.json" \
  --output-path "$WORK/python" >"$WORK/python.log" 2>&1
no_warnings openapi-python-client "$WORK/python.log"
# The generated package's dependencies (httpx, attrs, python-dateutil) are the generator's own.
PICTOR_API=$API PICTOR_KEY=$PY_KEY PYTHONPATH="$WORK/python" \
  "$WORK/venv/bin/python" tests/clients/python/smoke.py
# The manual's examples (docs/api.md, "Generated clients"), as written there (with this
# server's address and a key).
readme_example() {
  sed -n "/^\`\`\`$1\$/,/^\`\`\`\$/p" "$ROOT/docs/api.md" | sed '1d;$d' | sed "s#http://127.0.0.1:8080/api/pictor#$API#"
}
{ echo 'import os; KEY = os.environ["PICTOR_KEY"]'; readme_example python; } > "$WORK/readme.py"
PICTOR_KEY=$README_KEY PYTHONPATH="$WORK/python" "$WORK/venv/bin/python" "$WORK/readme.py" \
  | tee "$WORK/readme-py.out"
grep -q "^http://127.0.0.1:$PORT/files/.*\.png$" "$WORK/readme-py.out"

echo "== typescript: openapi-typescript + openapi-fetch, type-checked by tsc --strict"
(
  cd tests/clients/typescript
  npm ci --silent --no-audit --no-fund 2>/dev/null
  ./node_modules/.bin/openapi-typescript "$API/openapi.json" -o generated/pictor.d.ts \
    >"$WORK/typescript.log" 2>&1
  no_warnings openapi-typescript "$WORK/typescript.log"
  # No type degraded to `unknown` (only the response-header maps are open).
  if grep -v '\[name: string\]: unknown;' generated/pictor.d.ts | grep -En '(:|&|\|) unknown\b'; then
    echo "openapi-typescript typed part of the document as unknown (above)"
    exit 1
  fi
  { echo 'const KEY = process.env.PICTOR_KEY!;'; readme_example ts | sed 's#"./pictor"#"./generated/pictor.js"#'; } \
    > readme.ts
  ./node_modules/.bin/tsc -p .
  PICTOR_API=$API PICTOR_KEY=$TS_KEY node build/smoke.js
  PICTOR_KEY=$README_KEY node build/readme.js | tee "$WORK/readme-ts.out"
  grep -q "^http://127.0.0.1:$PORT/files/.*\.png$" "$WORK/readme-ts.out"
)

echo "== rust: progenitor (build.rs), built with warnings denied"
PICTOR_OPENAPI="$WORK/openapi-plain.json" CARGO_TARGET_DIR="$WORK/rust-target" RUSTFLAGS="-D warnings" \
  PICTOR_API=$API PICTOR_KEY=$RS_KEY \
  cargo run --quiet --locked --manifest-path tests/clients/rust/Cargo.toml

if grep -q "panicked" "$WORK/server.log"; then echo "the server panicked"; exit 1; fi
echo "clients: Python, TypeScript and Rust clients generated without warnings and work"
