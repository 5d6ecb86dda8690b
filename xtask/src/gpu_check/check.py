"""rocbuild's GPU check (issue 41 point 4): bitsandbytes built by rocbuild for CUDA, run on the
GPU of the machine this runs on and compared with the CPU, each kernel on the same input.

Exit status: 0 every comparison within its tolerance, 1 one was not (each is printed), 3 torch
sees no CUDA device (nothing was compared). `--device cpu` runs the same comparisons with the
CPU on both sides: it proves the script itself on a machine without a GPU, nothing more.
Writes one JSON line of results last (`gpu-check: {...}`).
"""

import json
import os
import sys
import time

import torch

DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cuda"
if DEVICE == "cuda" and not torch.cuda.is_available():
    print("gpu-check: torch %s sees no CUDA device (CUDA %s): nothing was compared"
          % (torch.__version__, torch.version.cuda))
    sys.exit(3)

# The wheel carries upstream's own CUDA libraries beside rocbuild's (its Python part is PyPI's):
# upstream's override makes the package load the one rocbuild built, named in the local version.
import importlib.metadata  # noqa: E402
import re  # noqa: E402

_local = re.search(r"\+cu(\d+)", importlib.metadata.version("bitsandbytes"))
BUILT = os.environ.get("BNB_CUDA_VERSION") or (_local.group(1) if _local else None)
if BUILT is None:
    print("gpu-check: bitsandbytes %s is not a rocbuild CUDA build (no +cuNNN in its version;"
          " set BNB_CUDA_VERSION to name the library)" % importlib.metadata.version("bitsandbytes"))
    sys.exit(2)
os.environ["BNB_CUDA_VERSION"] = BUILT

import bitsandbytes as bnb  # noqa: E402
import bitsandbytes.functional as F  # noqa: E402
from bitsandbytes.cextension import lib  # noqa: E402

results = []


def check(name, ok, detail):
    results.append({"check": name, "ok": bool(ok), "detail": detail})
    print("gpu-check: %-28s %s  %s" % (name, "ok  " if ok else "FAIL", detail))


def timed(fn, reps):
    """Seconds per call (after one warm-up), synchronized on a GPU."""
    fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps


def blockwise_8bit():
    torch.manual_seed(0)
    n, bs = 1 << 20, 256
    a = torch.randn(n, dtype=torch.float32)
    code = F.create_dynamic_map().to(torch.float32)
    qc, sc = F.quantize_blockwise(a, code=code, blocksize=bs)
    qg, sg = F.quantize_blockwise(a.to(DEVICE), code=code.to(DEVICE), blocksize=bs)
    differ = (qg.cpu() != qc).sum().item()
    check("8-bit blockwise codes", differ <= n // 1000,
          "%d of %d codes differ (at most 0.1%% may, at rounding ties)" % (differ, n))
    amax = (sg.absmax.cpu() - sc.absmax).abs().max().item()
    check("8-bit blockwise absmax", amax == 0.0, "max difference %g" % amax)
    back = F.dequantize_blockwise(qg, sg).cpu()
    err = (a - back).abs().mean().item()
    check("8-bit round trip", err < 0.011, "mean abs error %.5f (< 0.011)" % err)
    big = torch.randn(16 << 20, dtype=torch.float32)
    t_cpu = timed(lambda: F.quantize_blockwise(big, code=code, blocksize=bs), 3)
    big_d = big.to(DEVICE)
    code_d = code.to(DEVICE)
    t_dev = timed(lambda: F.quantize_blockwise(big_d, code=code_d, blocksize=bs), 20)
    return {"quantize_blockwise_16M": {"cpu_s": t_cpu, DEVICE + "_s": t_dev}}


def nf4_matmul():
    torch.manual_seed(1)
    k, m, rows = 4096, 4096, 8
    w = torch.randn(m, k, dtype=torch.float16) * 0.02
    x = torch.randn(rows, k, dtype=torch.float16)
    qw, st = F.quantize_4bit(w.to(DEVICE), blocksize=64, quant_type="nf4")
    wd = F.dequantize_4bit(qw, st, blocksize=64, quant_type="nf4").cpu().float()
    qc, sc = F.quantize_4bit(w, blocksize=64, quant_type="nf4")
    wc = F.dequantize_4bit(qc, sc, blocksize=64, quant_type="nf4").float()
    d = (wd - wc).abs().max().item()
    check("nf4 quantize (dequantized)", d <= 1e-3, "max difference %g from the CPU's" % d)
    err = (wd - w.float()).abs().mean().item() / w.float().abs().mean().item()
    check("nf4 round trip", err < 0.12, "relative mean abs error %.4f (< 0.12)" % err)
    ref = x.float() @ wc.t()
    xd = x.to(DEVICE)
    out = bnb.matmul_4bit(xd, qw.t(), quant_state=st).float().cpu()
    rel = ((out - ref).norm() / ref.norm()).item()
    check("nf4 matmul_4bit", rel < 1e-2, "relative error %.2e against fp32 on the CPU (< 1e-2)" % rel)
    xf, wf = x.float(), wc
    t_cpu = timed(lambda: xf @ wf.t(), 5)
    t_dev = timed(lambda: bnb.matmul_4bit(xd, qw.t(), quant_state=st), 50)
    return {"matmul_4bit_8x4096x4096": {"cpu_fp32_s": t_cpu, DEVICE + "_nf4_s": t_dev}}


def int8_matmul():
    torch.manual_seed(2)
    a = torch.randn(64, 1024, dtype=torch.float16)
    b = torch.randn(512, 1024, dtype=torch.float16)
    qa, sa, _ = F.int8_vectorwise_quant(a.to(DEVICE))
    qb, sb, _ = F.int8_vectorwise_quant(b.to(DEVICE))
    qa_c, sa_c, _ = F.int8_vectorwise_quant(a)
    differ = (qa.cpu() != qa_c).sum().item()
    check("int8 row-wise quantize", differ <= a.numel() // 1000,
          "%d of %d values differ from the CPU's" % (differ, a.numel()))
    prod = F.int8_linear_matmul(qa, qb).cpu()
    exact = qa.cpu().to(torch.int64) @ qb.cpu().to(torch.int64).t()
    check("int8 matmul (int32)", torch.equal(prod.to(torch.int64), exact),
          "integer products against the CPU's, exactly")
    ref = a.float() @ b.float().t()
    out = bnb.matmul(a.to(DEVICE), b.to(DEVICE), threshold=0.0).float().cpu() if DEVICE == "cuda" else None
    if out is not None:
        rel = ((out - ref).norm() / ref.norm()).item()
        check("LLM.int8 matmul", rel < 2e-2, "relative error %.2e against fp32 on the CPU (< 2e-2)" % rel)
    return {}


def main():
    name = os.path.basename(getattr(getattr(lib, "_lib", None), "_name", "") or "none")
    about = {
        "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu",
        "capability": "%d.%d" % torch.cuda.get_device_capability(0) if DEVICE == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "bitsandbytes": bnb.__version__,
        "library": name,
    }
    print("gpu-check: " + ", ".join("%s %s" % kv for kv in about.items()))
    want = "libbitsandbytes_cuda%s.so" % BUILT
    if DEVICE == "cuda":
        check("library loaded", name == want, "%s (rocbuild's build: %s)" % (name, want))
    timings = {}
    for part in (blockwise_8bit, nf4_matmul, int8_matmul):
        try:
            timings.update(part())
        except Exception as e:  # one broken kernel must not hide the others
            check(part.__name__, False, "raised %s: %s" % (type(e).__name__, e))
    ok = all(r["ok"] for r in results)
    print("gpu-check: " + json.dumps({"about": about, "results": results, "timings": timings, "ok": ok}))
    sys.exit(0 if ok else 1)


main()
