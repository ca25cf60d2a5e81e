#!/usr/bin/env bash
# The resolved config is plain YAML: PyYAML (python3-yaml) reads every key of it once, with the
# same values — a config dumped back by PyYAML resolves to the same settings in sfvit. And
# the key table of docs/configs.md is exactly the one the code generates.
# Usage: test_config_yaml.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-yaml-XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
source "$ROOT/tests/lib.sh"

# ---- docs/configs.md holds the generated key table ----
"$SFVIT" config --keys > keys.md
awk '/^## Every key/ { s = 1 } s && /^\|/' "$ROOT/docs/configs.md" > doc.md
if cmp -s keys.md doc.md; then ok "docs/configs.md key table is generated from the code"
else
  bad "docs/configs.md key table differs from \`sfvit config --keys\` (run tests/gen_configs_doc.sh)"
  diff doc.md keys.md | head -20
fi
nkeys=$(grep -c '^| `' keys.md)
check "key table lists $nkeys keys" test "$nkeys" -gt 50

# ---- PyYAML reads the resolved config back to the same values ----
PY=/usr/bin/python3
if ! "$PY" -c 'import yaml' 2> /dev/null; then
  bad "PyYAML missing: apt-get install python3-yaml (scripts/install_deps.sh installs it)"
  echo "$passed passed, $failed failed"; exit 1
fi
cat > check.py <<'PYEOF'
import sys, yaml
src, dst, nkeys = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(src).read()
# A loader that refuses a repeated key instead of keeping the last one.
class Strict(yaml.SafeLoader): pass
def mapping(loader, node):
    keys = [loader.construct_object(k) for k, _ in node.value]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup: raise ValueError("repeated keys: %s" % sorted(dup))
    return loader.construct_mapping(node)
Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
d = yaml.load(text, Loader=Strict)
assert sorted(d) == sorted(["model", "data", "aug", "optim", "sched", "train"]), sorted(d)
n = sum(len(v) for v in d.values())
assert n == nkeys, "%d keys read, %d in the table" % (n, nkeys)
types = {"optim": {"lr": float, "eps": float, "accum_steps": int, "scale_lr": bool},
         "aug": {"mean": list, "randaugment": str}, "train": {"seed": int}}
for sec, kt in types.items():
    for k, t in kt.items():
        assert isinstance(d[sec][k], t), "%s.%s read as %r" % (sec, k, d[sec][k])
open(dst, "w").write(yaml.safe_dump(d, sort_keys=False))
PYEOF
n=0
for cfg in "$ROOT"/configs/*.yaml; do
  b=$(basename "$cfg" .yaml)
  "$SFVIT" config "$cfg" > "$b.yaml" || { bad "sfvit config $b"; continue; }
  if "$PY" check.py "$b.yaml" "$b.py.yaml" "$nkeys" > py.err 2>&1; then
    "$SFVIT" config "$b.py.yaml" > "$b.back.yaml" 2> back.err
    check "$b: PyYAML reads every key once, with the same values" cmp -s "$b.yaml" "$b.back.yaml"
    cmp -s "$b.yaml" "$b.back.yaml" || { diff "$b.yaml" "$b.back.yaml" | head; cat back.err; }
  else
    bad "$b: PyYAML reading"; cat py.err
  fi
  n=$((n + 1))
done
check "checked $n shipped configs" test $n -ge 5
# The run folder's config.yaml is the same writer's text; a value with YAML's special
# characters survives too.
"$SFVIT" config "$ROOT/configs/fmnist_tiny.yaml" 'data.root=/data/x #1: "q"' train.name=a-b > special.yaml
"$PY" check.py special.yaml special.py.yaml "$nkeys" && "$SFVIT" config special.py.yaml > special.back.yaml
check "strings with '#', ':' and quotes survive PyYAML" cmp -s special.yaml special.back.yaml


# ---- a pyramid's single-width keys follow its per-stage lists ----
# model.depth, model.embed_dim and model.num_heads of SOFT and CvT are the total of
# model.depths and the last stage's width and heads, whatever the preset or a file says.
model_keys() { "$SFVIT" config "$@" | awk '/^  (depth|embed_dim|num_heads):/ { printf "%s%s", $1, $2 }'; }
check "CvT with its own depths: depth 4, embed_dim 96, num_heads 3 (not CvT-13's 13, 384, 6)" \
  test "$(model_keys "$ROOT/configs/fmnist_cvt_sima.yaml")" = "embed_dim:96depth:4num_heads:3"
check "CvT: an override of model.depths moves model.depth" \
  test "$(model_keys "$ROOT/configs/fmnist_cvt_sima.yaml" 'model.depths=[2,1,3]' 'model.num_heads=[1,2,6]')" = \
  "embed_dim:96depth:6num_heads:6"
check "SOFT with its own lists: depth 4, embed_dim 64, num_heads 2" \
  test "$(model_keys "$ROOT/configs/soft_tiny.yaml" 'model.embed_dims=[16,32,32,64]' 'model.depths=[1,1,1,1]' \
    'model.num_heads=[2,2,2,2]')" = "embed_dim:64depth:4num_heads:2"
# a config.yaml written before the keys followed (CvT-13's sizes next to 4 blocks) loads with them mended
"$SFVIT" config "$ROOT/configs/fmnist_cvt_sima.yaml" | sed 's/^  depth: .*/  depth: 13/; s/^  embed_dim: .*/  embed_dim: 384/' > stale.yaml
check "a stored config with a stale model.depth loads, and says 4" test "$(model_keys stale.yaml)" = "embed_dim:96depth:4num_heads:3"
check "ViT: model.depth stays what the config says" \
  test "$(model_keys "$ROOT/configs/fmnist_tiny.yaml" model.depth=3 | grep -o "depth:[0-9]*")" = "depth:3"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
