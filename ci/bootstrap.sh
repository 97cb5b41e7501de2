#!/usr/bin/env bash
# Installs everything ddx needs on a fresh Debian 12 machine. Idempotent: a second run
# only checks. Run as root (CI and the dev machines are root); set DDX_SKIP_APT=1 to skip
# the Debian part when the packages are known to be present.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The PyPI wheel whose LibTorch we build against and whose PyTorch the reference tests use.
# 2.11.0 is what the GPU machines run; its CUDA 13.0 build matches the toolkit on PATH.
TORCH_VERSION="${DDX_TORCH_VERSION:-2.11.0}"
TRANSFORMERS_VERSION="${DDX_TRANSFORMERS_VERSION:-5.25.0}"
venv="${DDX_VENV:-$root/.venv}"

debian_packages=(
  build-essential cmake ninja-build ccache pkg-config
  patchelf   # ci/gpu_bundle.sh: the bundled ddx finds its carried libraries ($ORIGIN/../lib)
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  libbackward-cpp-dev libdw-dev
  libgloo-dev   # headers only: the torch wheel ships c10d's Gloo header but not the gloo headers it includes
  mpich libmpich-dev
  libncurses-dev tmux   # ddx top's terminal view (no FTXUI package in Debian 12), and its tmux test
  python3-venv
  slurmctld slurmd slurm-client munge   # a private two-node SLURM in the tests (tests/dist/slurm_cluster.h)
)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${DDX_SKIP_APT:-0}" != 1 ] && [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py="${DDX_PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  echo "bootstrap: creating virtualenv $venv"
  "$py" -m venv "$venv"
fi
have=$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$have" != "$TORCH_VERSION" ]; then
  echo "bootstrap: installing torch==$TORCH_VERSION into $venv (pip's cache makes re-runs fast)"
  "$venv/bin/pip" install -q "torch==$TORCH_VERSION" numpy safetensors tokenizers
fi
# transformers for the `reference` label (tests/python/hf_reference.py reads Hugging Face configs
# with it): pinned, so the layout it writes (5.x: rope_parameters) is the one tested.
have_tf=$("$venv/bin/python" -c 'import transformers; print(transformers.__version__)' 2>/dev/null || true)
if [ "$have_tf" != "$TRANSFORMERS_VERSION" ]; then
  echo "bootstrap: installing transformers==$TRANSFORMERS_VERSION into $venv"
  "$venv/bin/pip" install -q "transformers==$TRANSFORMERS_VERSION"
fi
"$venv/bin/python" - <<'PY'
import torch
print(f"bootstrap: torch {torch.__version__} (CUDA build {torch.version.cuda}) at {torch.utils.cmake_prefix_path}")
PY
