#!/bin/bash
# The input pipeline against torchvision (Debian's python3-torchvision, PIL decoding):
# for generated JPEGs, transform_dump's output (libjpeg-turbo decode at a reduced DCT
# scale, our crop box and resampler, normalisation) is compared with
#   validation: Resize(resize) + CenterCrop(crop) + ToTensor + Normalize
#   training:   resized_crop(the box our pipeline drew) + hflip (if drawn) + ToTensor + Normalize
# on the same file. Values are in normalised units (1/255 of a channel is about 0.017).
#
# Tolerances, per image, in normalised units:
#  - decoded at full scale: mean |diff| <= 0.01, max <= 0.05 (3/255 of a channel). PIL
#    rounds to 8 bits after each resampling pass, we keep floats: about 1/255 apart.
#  - decoded at a reduced DCT scale (images over twice the crop): mean |diff| <= 0.05,
#    max <= 0.3. The difference is in the colour: libjpeg-turbo upsamples the 4:2:0
#    chroma of a scaled decode differently (measured about 0.03 mean). The brightness
#    (luma) must still agree within 1/255 on average, which a crop misplaced by a
#    quarter of a source pixel already misses.
# A crop shifted by one pixel, mirrored, or normalised with the wrong channel order is
# off by tenths on average.
set -u
DUMP="$1"
MAKE_DATASET="$2"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/pipeline_tv.XXXXXX")"

# Three sets: small images (96..160 px) at the demo's crop 64 / resize 73; large ones
# (300..520 px) at 224 / 256, both decoded at full scale; huge ones (720..1000 px), which
# a 224 crop decodes at a reduced DCT scale. Noise-free textures: the generator's
# per-pixel noise is what two decoders round most differently.
"$MAKE_DATASET" --out="$OUT/small" --classes=3 --train_per_class=2 --val_per_class=1 --noise=0 >/dev/null &&
  "$MAKE_DATASET" --out="$OUT/large" --classes=3 --train_per_class=2 --val_per_class=1 --min_size=300 \
    --max_size=520 --noise=0 --seed=7 >/dev/null &&
  "$MAKE_DATASET" --out="$OUT/huge" --classes=2 --train_per_class=2 --val_per_class=1 --min_size=720 \
    --max_size=1000 --noise=0 --seed=9 >/dev/null || { echo "FAIL: make_dataset"; exit 1; }

# One line per case: path mode crop resize dump box(x y w h) flip scale.
list="$OUT/cases.txt"
: >"$list"
n=0
for set in small large huge; do
  if [ "$set" = small ]; then crop=64 resize=73; else crop=224 resize=256; fi
  for image in "$OUT/$set"/*/*/*.JPEG; do
    for mode in train val; do
      n=$((n + 1))
      line=$("$DUMP" --mode="$mode" --crop=$crop --resize=$resize --seed=3 --epoch=1 --position="$n" "$image" \
        "$OUT/dump_$n.f32") || { echo "FAIL: transform_dump $image"; exit 1; }
      read -r _ x y w h _ flip _ _ _ _ scale <<<"$line"
      echo "$image $mode $crop $resize $OUT/dump_$n.f32 $x $y $w $h $flip $scale" >>"$list"
    done
  done
done

timeout 240 /usr/bin/python3 - "$list" <<'PY'
import sys
import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

mean_rgb, std_rgb = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
normalize = T.Normalize(mean_rgb, std_rgb)


def luma(chw):
    # Brightness in [0, 1] of normalised (C, H, W) values.
    rgb = [chw[c] * std_rgb[c] + mean_rgb[c] for c in range(3)]
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


failures = flips = reduced = 0
for line in open(sys.argv[1]):
    path, mode, crop, resize, dump, x, y, w, h, flip, scale = line.split()
    crop, resize, flip, scale = int(crop), int(resize), flip == "1", float(scale)
    image = Image.open(path).convert("RGB")
    if mode == "val":
        picture = T.CenterCrop(crop)(T.Resize(resize)(image))
    else:
        # Training boxes are whole pixels (torchvision's RandomResizedCrop arithmetic).
        picture = F.resized_crop(image, int(float(y)), int(float(x)), int(float(h)), int(float(w)), [crop, crop])
        if flip:
            picture = F.hflip(picture)
            flips += 1
    reference = normalize(F.to_tensor(picture))
    ours = torch.from_numpy(np.fromfile(dump, dtype=np.float32).reshape(3, crop, crop))
    difference = (ours - reference).abs()
    mean, worst = difference.mean().item(), difference.max().item()
    luma_mean = (luma(ours) - luma(reference)).abs().mean().item()
    mean_bound, max_bound = (0.01, 0.05) if scale == 1 else (0.05, 0.3)
    reduced += scale < 1
    ok = mean <= mean_bound and worst <= max_bound and luma_mean <= 1 / 255
    failures += not ok
    print("%s %4dx%-4d %-5s decoded at %.3f: mean |diff| %.4f max %.4f, luma mean |diff| %.4f: %s" %
          (path.split("/")[-1], image.width, image.height, mode, scale, mean, worst, luma_mean,
           "OK" if ok else "FAIL"))
if flips == 0:
    print("FAIL: no training crop was flipped; the flip was not compared")
    failures += 1
if reduced < 2:
    print("FAIL: only %d image(s) decoded at a reduced DCT scale" % reduced)
    failures += 1
sys.exit(1 if failures else 0)
PY
status=$?
[ "$status" -eq 0 ] && { rm -rf "$OUT"; echo "PASS"; } || echo "FAIL (files in $OUT)"
exit "$status"
