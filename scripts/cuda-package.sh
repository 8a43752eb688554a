#!/usr/bin/env bash
# cuda-package.sh: build everything a GPU machine needs to run
# scripts/gpu-run.sh into bin/gpu/ (git-ignored; the device tool's `carry`
# brings it: carry ["bin/gpu"]). That machine has a CUDA 13 image with no Go
# and no network, so everything is built here, into bin/gpu-build/ (not
# carried), then packed:
#
#   bin/gpu/bin.tar.gz    (gzip -9; gpu-run.sh unpacks it into a scratch folder)
#     engine-core-cuda    engine-core -tags cuda (loads libcuda and cuBLAS at run time)
#     api-frontend, bench
#     test/cuda.test, test/cudaexec.test   go test -c -tags cuda of kernels/cuda, engine-core/cudaexec
#     lib/                libzmq and the libraries it needs that a CUDA image may lack
#   bin/gpu/models/       aidreams260K, stories260K, llama-2-tiny-random, reference-outputs.json
#                         (copied from ../shared/models, which does not travel)
#   bin/gpu/MANIFEST      commit, date, glibc needed, sizes, contents
#
# Binaries are stripped (-s -w). The script prints the size of what travels
# (the working tree's tracked and unignored files plus bin/gpu) and fails
# over 64 MiB, the most one device call may carry.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "cuda-package: $*" >&2; }

LIMIT=$((64 * 1024 * 1024))
DST=bin/gpu-build
PKG=bin/gpu
MODELS=${SLUICE_SHARED_MODELS:-../shared/models}
export CGO_ENABLED=1
eval "$(bash scripts/cuda-toolkit.sh)"
bash scripts/cuda-fatbin.sh

rm -rf "$DST" "$PKG"
mkdir -p "$DST/test" "$DST/lib" "$PKG/models"
LDF='-s -w'
step "go build -tags cuda engine-core; api-frontend, bench"
go build -tags cuda -trimpath -ldflags "$LDF" -o "$DST/engine-core-cuda" ./engine-core
go build -trimpath -ldflags "$LDF" -o "$DST/" ./api-frontend ./bench
for p in ./kernels/cuda ./engine-core/cudaexec; do
	step "go test -c -tags cuda $p"
	go test -c -tags cuda -trimpath -ldflags "$LDF" -o "$DST/test/$(basename "$p").test" "$p"
done
if readelf -d "$DST/engine-core-cuda" "$DST"/test/*.test | grep -E 'NEEDED.*(libcuda|libcublas)'; then
	step "FAIL: a CUDA binary has DT_NEEDED on libcuda/libcublas (they must be dlopened)"
	exit 1
fi

# Shared libraries: what ldd resolves for the binaries, except the C
# runtime that every Linux has (glibc, libstdc++, libgcc).
step "shared libraries"
ldd "$DST/engine-core-cuda" "$DST/api-frontend" "$DST"/test/*.test | awk '/=> \//{print $3}' | sort -u |
	grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
	while read -r lib; do cp -L "$lib" "$DST/lib/"; done
glibc=$(objdump -T "$DST/engine-core-cuda" "$DST/api-frontend" "$DST"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)

if [ -d "$MODELS" ]; then
	step "models from $MODELS"
	for m in aidreams260K stories260K llama-2-tiny-random; do cp -r "$MODELS/$m" "$PKG/models/"; done
	cp "$MODELS/reference-outputs.json" "$PKG/models/"
	chmod -R u+w "$PKG/models"
else
	step "WARNING: $MODELS not found: the bundle has no models (gpu-run.sh's model tests will fail)"
fi

tar -C "$DST" -cf - engine-core-cuda api-frontend bench test lib | gzip -9 >"$PKG/bin.tar.gz"
tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
bundle=$(find "$PKG" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
total=$((tree + bundle))
{
	echo "commit: $(git rev-parse --short HEAD)$([ -n "$(git status --porcelain --untracked-files=no)" ] && echo ' (dirty)')"
	echo "built: $(date -u +%FT%TZ) on $(uname -m), $(go version | cut -d' ' -f3), nvcc $("$NVCC" --version | grep -o 'release [0-9.]*')"
	echo "needs: glibc >= ${glibc#GLIBC_}, an NVIDIA driver >= 520 (libcuda.so.1), cuBLAS 11/12/13 (soname, \$SLUICE_CUBLAS or the pip wheel nvidia-cublas)"
	echo "sizes: working tree $tree B + bin/gpu $bundle B = $total B (limit $LIMIT B)"
	echo "bin.tar.gz holds (unpacked sizes):"
	(cd "$DST" && find . -type f -printf '%s\t%p\n' | sort -k2)
	echo "bin/gpu:"
	(cd "$PKG" && find . -type f ! -name MANIFEST -printf '%s\t%p\n' | sort -k2)
} >"$PKG/MANIFEST"
step "bin/gpu: $((bundle / 1024 / 1024)) MiB; with the working tree ($((tree / 1024 / 1024)) MiB): $((total / 1024 / 1024)) MiB of 64 MiB; needs glibc >= ${glibc#GLIBC_}"
if [ "$total" -gt "$LIMIT" ]; then
	step "FAIL: what travels ($total bytes) is over the 64 MiB a device call carries"
	exit 1
fi
