#!/usr/bin/env bash
# cibuildwheel's before-all for the manylinux_2_28 x86_64 wheels (pyproject.toml,
# [tool.cibuildwheel]): installs the CUDA compiler and the static CUDA runtime in the build
# image (AlmaLinux 8) from NVIDIA's RHEL 8 repository, and links /usr/local/cuda to them.
# It needs the network of the CI that runs cibuildwheel (this project's CI machine has none
# beyond PyPI and Debian, and builds its wheel with tools/build_wheel.sh instead).
#
#   FASTRDF_CIBW_CUDA   the toolkit version, as NVIDIA's package names write it (default 13-0)
set -euxo pipefail
version="${FASTRDF_CIBW_CUDA:-13-0}"
dnf install -y dnf-plugins-core
dnf config-manager --add-repo \
  https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/cuda-rhel8.repo
dnf install -y "cuda-nvcc-${version}" "cuda-cudart-devel-${version}"
ln -sfn "/usr/local/cuda-${version/-/.}" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version
