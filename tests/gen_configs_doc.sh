#!/usr/bin/env bash
# Rewrites the key table of docs/configs.md (section "Every key") from the key table in the
# code: `sfvit config --keys`. tests/test_config_yaml.sh fails while the two differ.
# Usage: tests/gen_configs_doc.sh [SFVIT_BINARY]   (default build/sfvit)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SFVIT=${1:-$ROOT/build/sfvit}
DOC=$ROOT/docs/configs.md
table=$("$SFVIT" config --keys)
awk -v table="$table" '
  /^## Every key/ { in_sec = 1 }
  in_sec && /^\|/ { if (!done) { print table; done = 1 } next }
  { print }
' "$DOC" > "$DOC.tmp"
mv "$DOC.tmp" "$DOC"
echo "updated $DOC"
