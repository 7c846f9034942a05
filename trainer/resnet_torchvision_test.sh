#!/bin/bash
# Compares trainer::ResNet (defaults) with torchvision's resnet50 (Debian's
# python3-torchvision): the parameter count, and the name and shape of every parameter
# and buffer of the state dict (checked by model_test's MatchesTorchvisionLayout).
# Usage: resnet_torchvision_test.sh path/to/model_test
set -u
TEST_BIN="$1"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/resnet_tv.XXXXXX")"

if ! timeout 240 /usr/bin/python3 - "$OUT/layout.txt" <<'PY'
import sys
import torchvision
model = torchvision.models.resnet50()
count = sum(p.numel() for p in model.parameters())
print("torchvision resnet50 parameters:", count)
if count != 25557032:
    sys.exit("unexpected torchvision parameter count %d" % count)
with open(sys.argv[1], "w") as out:
    for name, tensor in model.state_dict().items():
        out.write("%s %s\n" % (name, "x".join(str(s) for s in tensor.shape)))
PY
then
  echo "FAIL: could not list torchvision's resnet50 (is python3-torchvision installed?)"
  exit 1
fi
TORCHVISION_LAYOUT="$OUT/layout.txt" timeout 240 "$TEST_BIN" --gtest_filter='ResNet.ResNet50HasTorchvisionsParameterCount:ResNet.MatchesTorchvisionLayout' 2>&1 | tee "$OUT/log"
status=${PIPESTATUS[0]}
if grep -q "SKIPPED" "$OUT/log" || ! grep -q "PASSED  \] 2 tests" "$OUT/log"; then
  echo "FAIL: the two comparisons did not both run and pass"
  exit 1
fi
rm -rf "$OUT"
exit "$status"
