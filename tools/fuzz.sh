#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz with clang's libFuzzer, ASan and UBSan, and runs
# each for a fixed number of inputs from its stored corpus (docs/fuzzing.md). Exits
# non-zero when a target fails to build, or any input crashes, hangs (-timeout), leaks
# (ASan's leak checker) or trips UBSan; the input is kept as an artifact.
#
# Usage: bash tools/fuzz.sh [--runs N] [--build-only] [target ...]
#   targets default to every fuzz_target in tests/fuzz/BUILD (e.g. settings_fuzz);
#   --runs N inputs per target (default 20000; TESSERA_FUZZ_RUNS); TESSERA_FUZZ_SEED
#   picks libFuzzer's seed (default 1, so a CI run is reproducible).
#
# Bazel is configured for gcc, so the script asks Bazel (bazel query, offline) which
# sources each target's library depends on and compiles them itself with clang++-14;
# objects are kept between runs under Bazel's output base and rebuilt when a source or
# a header it includes changes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs="${TESSERA_FUZZ_RUNS:-20000}"
seed="${TESSERA_FUZZ_SEED:-1}"
build_only=0
targets=()
while (( $# > 0 )); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    *) targets+=("$1"); shift ;;
  esac
done
if (( ${#targets[@]} == 0 )); then
  mapfile -t targets < <(sed -n 's/^ *name = "\([a-z0-9_]*_fuzz\)",$/\1/p' tests/fuzz/BUILD)
fi

cxx="${CXX_FUZZ:-clang++-14}"
out="$(bazel info output_base 2>/dev/null)/tessera-fuzz"
mkdir -p "${out}/obj" "${out}/bin" "${out}/artifacts"
cflags=(-std=c++17 -O1 -g -I. -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
        -fno-sanitize-recover=undefined -DTESSERA_FUZZING)
ldflags=(-fsanitize=fuzzer,address,undefined -pthread)

# Compiles one source unless its object is newer than it and every header it included.
compile() {
  local src="$1" obj="${out}/obj/${1//\//__}.o"
  if [[ -f "${obj}" && -f "${obj%.o}.d" ]]; then
    local stale=0 dep
    for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "${obj%.o}.d"); do
      if [[ "${dep}" -nt "${obj}" ]]; then stale=1; break; fi
    done
    (( stale == 0 )) && return 0
  fi
  # shellcheck disable=SC2086 # the flags are words
  "${cxx}" ${cflags_words} -MMD -MF "${obj%.o}.d" -c "${src}" -o "${obj}"
}
# (for xargs' shells: a function and plain variables, arrays cannot be exported)
export -f compile
export out cxx cflags_words="${cflags[*]}"

declare -A sources_of
all_sources=()
for t in "${targets[@]}"; do
  # Workspace sources only (the toolchain's and third-party labels are not compiled here).
  mapfile -t srcs < <(bazel query --noshow_progress "kind('source file', deps(//tests/fuzz:${t}_lib))" 2>/dev/null |
    sed -n 's#^//\([^:]*\):\(.*\.cc\)$#\1/\2#p' | sed 's#^/##' | grep -v '^third_party/')
  if (( ${#srcs[@]} == 0 )); then echo "fuzz: no sources for ${t} (is it in tests/fuzz/BUILD?)" >&2; exit 1; fi
  sources_of["${t}"]="${srcs[*]}"
  all_sources+=("${srcs[@]}")
done

echo "fuzz: compiling $(printf '%s\n' "${all_sources[@]}" | sort -u | wc -l) sources with ${cxx}"
printf '%s\n' "${all_sources[@]}" | sort -u |
  xargs -P 2 -I{} bash -c 'compile "$1"' _ {}
for t in "${targets[@]}"; do
  objs=()
  for src in ${sources_of[${t}]}; do objs+=("${out}/obj/${src//\//__}.o"); done
  "${cxx}" "${ldflags[@]}" "${objs[@]}" -o "${out}/bin/${t}"
done
echo "fuzz: built ${#targets[@]} targets in ${out}/bin"
(( build_only == 1 )) && exit 0

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
failed=()
for t in "${targets[@]}"; do
  work="$(mktemp -d)"
  start=$SECONDS
  if "${out}/bin/${t}" -runs="${runs}" -seed="${seed}" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
       -print_final_stats=1 -artifact_prefix="${out}/artifacts/${t}-" "${work}" "tests/fuzz/corpus/${t}" \
       > "${out}/${t}.log" 2>&1; then
    echo "fuzz: ${t}: ${runs} inputs, no failure ($((SECONDS - start)) s)"
  else
    echo "fuzz: ${t}: FAILED after $((SECONDS - start)) s; the log's end and the input:" >&2
    tail -n 40 "${out}/${t}.log" >&2
    ls -l "${out}/artifacts/${t}-"* >&2 2>/dev/null || true
    failed+=("${t}")
  fi
  rm -rf "${work}"
done
if (( ${#failed[@]} > 0 )); then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${runs} inputs each without a crash, hang or leak"
