#!/usr/bin/env bash
# The main job lives in scripts/fmnist.sh (README); this name still works for commands
# written before it moved there. Same arguments: config overrides.
exec bash "$(cd "$(dirname "$0")/.." && pwd)/scripts/fmnist.sh" "$@"
