#!/usr/bin/env bash
# rocbuild's GPU check, run where the GPU is (no cargo, no package index, no pip needed): the
# carried bitsandbytes wheel is unpacked into a scratch folder put first on PYTHONPATH (the
# package loads its library with ctypes, so whichever Python has torch will do, whatever the
# wheel's Python tag), then check.py compares GPU with CPU. PYTHON names the interpreter that
# has torch (default: python3). Exit status: check.py's (0 all within tolerance, 1 a
# difference, 3 no CUDA device), 2 when the set-up fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wheels=("$here"/bitsandbytes-*.whl)
if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
    echo "gpu-check: expected one bitsandbytes wheel in $here: run cargo xtask gpu-check --prepare" >&2
    exit 2
fi
"$python" -c 'import torch, numpy' || { echo "gpu-check: $python lacks torch or numpy (set PYTHON)" >&2; exit 2; }
"$python" -m zipfile -e "${wheels[0]}" "$work/site" || exit 2
cd "$work" && PYTHONPATH="$work/site" "$python" "$here/check.py" "$@"
