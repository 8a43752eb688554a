#!/usr/bin/env bash
# cuda-toolkit.sh: make a CUDA 11.8 toolkit (headers, link stubs, nvcc)
# available without root and without touching the system, then print the
# environment that points Go's cgo and nvcc at it.
#
# Usage: eval "$(bash scripts/cuda-toolkit.sh)"
#
# If NVCC is already set, or CUDA_HOME points at a real toolkit (a GPU host
# with NVIDIA's toolkit installed), that toolkit is used as is. Otherwise
# Debian bookworm's nvidia-cuda-dev and nvidia-cuda-toolkit 11.8 packages are
# fetched with `apt-get download` through a private sources list (the
# machine's Debian sources plus the non-free component) and private apt
# state/cache directories, checked against pinned sha256 sums, and unpacked
# into ${XDG_CACHE_HOME:-$HOME/.cache}/sluice/cuda-11.8. Later runs reuse the
# unpacked folder (a stamp file records the pinned sums).
set -euo pipefail

log() { echo "cuda-toolkit: $*" >&2; }

emit_env() { # root nvcc ccbin-flags
	# Debian layout: stubs only (compile check). NVIDIA's layout (a GPU
	# host): the real libraries first, the libcuda stub after.
	local inc="$1/include" lib="-L$1/lib/x86_64-linux-gnu/stubs"
	[ -d "$1/lib64" ] && lib="-L$1/lib64 -L$1/lib64/stubs"
	printf 'export CUDA_ROOT=%q\n' "$1"
	printf 'export NVCC=%q\n' "$2"
	printf 'export NVCC_CCBIN_FLAGS=%q\n' "$3"
	printf 'export CGO_CFLAGS=%q\n' "-I$inc ${CGO_CFLAGS:-}"
	printf 'export CGO_LDFLAGS=%q\n' "$lib ${CGO_LDFLAGS:-}"
}

# Host compiler flags for nvcc 11.8: it accepts gcc <= 11; g++-12 works for
# these kernels with -allow-unsupported-compiler (same PTX and cubin).
ccbin_flags() {
	if [ -n "${NVCC_CCBIN_FLAGS:-}" ]; then
		echo "$NVCC_CCBIN_FLAGS"
	elif command -v g++-11 >/dev/null; then
		echo "-ccbin g++-11"
	elif command -v g++-12 >/dev/null; then
		echo "-ccbin g++-12 -allow-unsupported-compiler"
	else
		echo "-allow-unsupported-compiler"
	fi
}

if [ -n "${NVCC:-}" ] && [ -n "${CUDA_HOME:-}" ]; then
	emit_env "$CUDA_HOME" "$NVCC" "$(ccbin_flags)"
	exit 0
fi
if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
	emit_env "$CUDA_HOME" "$CUDA_HOME/bin/nvcc" "$(ccbin_flags)"
	exit 0
fi

VERSION='11.8.89~11.8.0-5~deb12u1'
declare -A SHA256=(
	[nvidia-cuda-dev]=dc63bf2fb94aaaf903e9bad0c35f631266077d016b34329ec7af456bd7fed5ec
	[nvidia-cuda-toolkit]=d1156026e704fe0368b6295db06224ed00a727966fb13454f34e3f3102db0457
)
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/cuda-11.8"
ROOT="$CACHE/root/usr"
STAMP="$CACHE/root/.complete"
WANT_STAMP="$VERSION ${SHA256[nvidia-cuda-dev]} ${SHA256[nvidia-cuda-toolkit]}"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_STAMP" ]; then
	emit_env "$ROOT" "$ROOT/lib/nvidia-cuda-toolkit/bin/nvcc" "$(ccbin_flags)"
	exit 0
fi

log "fetching Debian CUDA $VERSION into $CACHE (about 860 MB download, 1-2 min; once)"
APT="$CACHE/apt"
rm -rf "$APT" "$CACHE/root"
mkdir -p "$APT/sources" "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/debs" "$CACHE/root"

# Private sources: the machine's Debian entries with non-free added.
src_found=0
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	grep -q 'deb.debian.org\|debian' "$f" || continue
	sed -E 's/^(Components:.*\bmain\b.*)$/\1 non-free/; s/(non-free)( non-free)+/\1/' "$f" >"$APT/sources/$(basename "$f")"
	src_found=1
done
if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
	grep '^deb ' /etc/apt/sources.list | grep -v non-free | sed -E 's/ main( |$)/ main non-free\1/' >"$APT/sources/base.list" || true
	src_found=1
fi
if [ "$src_found" = 0 ]; then
	printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$APT/sources/debian.sources"
fi

aptopts=(
	-o "Dir::Etc::SourceList=/dev/null"
	-o "Dir::Etc::SourceParts=$APT/sources"
	-o "Dir::State::Lists=$APT/lists"
	-o "Dir::Cache=$APT/cache"
	-o "Debug::NoLocking=1"
	-o "APT::Sandbox::User=$(id -un)"
)
apt-get -qq "${aptopts[@]}" update >&2
(cd "$APT/debs" && apt-get -qq "${aptopts[@]}" download "nvidia-cuda-dev=$VERSION" "nvidia-cuda-toolkit=$VERSION" >&2)

for pkg in nvidia-cuda-dev nvidia-cuda-toolkit; do
	deb=$(ls "$APT/debs/${pkg}_"*.deb)
	got=$(sha256sum "$deb" | cut -d' ' -f1)
	if [ "$got" != "${SHA256[$pkg]}" ]; then
		log "sha256 mismatch for $deb: got $got, want ${SHA256[$pkg]}"
		exit 1
	fi
done

log "unpacking headers and link stubs (nvidia-cuda-dev, about 1 min: the whole xz archive is decompressed)"
dpkg-deb --fsys-tarfile "$APT/debs/nvidia-cuda-dev_"*.deb |
	tar -x -C "$CACHE/root" ./usr/include ./usr/lib/x86_64-linux-gnu/stubs
log "unpacking nvcc (nvidia-cuda-toolkit)"
dpkg-deb --fsys-tarfile "$APT/debs/nvidia-cuda-toolkit_"*.deb |
	tar -x -C "$CACHE/root" ./usr/bin ./usr/include/nvvm.h ./usr/lib/nvidia-cuda-toolkit/bin ./usr/lib/nvidia-cuda-toolkit/libdevice

# The package's nvcc.profile is a link to /etc/nvcc.profile with absolute
# /usr paths; write a relocatable one.
rm -f "$ROOT/lib/nvidia-cuda-toolkit/bin/nvcc.profile"
cat >"$ROOT/lib/nvidia-cuda-toolkit/bin/nvcc.profile" <<'EOF'
NVVMIR_LIBRARY_DIR = $(_HERE_)/../libdevice
PATH += $(_HERE_):$(_HERE_)/../../../bin:
INCLUDES += "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu/stubs"
EOF
rm -rf "$APT"
echo "$WANT_STAMP" >"$STAMP"
log "done: $(du -sh "$CACHE/root" | cut -f1) in $CACHE/root"
emit_env "$ROOT" "$ROOT/lib/nvidia-cuda-toolkit/bin/nvcc" "$(ccbin_flags)"
