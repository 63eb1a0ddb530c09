"""Where an eager call's time goes: event and host times of rss and of torch's own softmax (the autograd floor),
host issue cost per call on a tiny shape, and a profiler table of rss forward+backward.

    python3 python/benchmarks/diag_eager.py > diag.txt     (no options; needs torch with CUDA and rss_torch)
"""
import statistics, sys, time
if sys.argv[1:]:
    sys.exit(print(__doc__) if sys.argv[1] in ("-h", "--help") else f"diag_eager.py takes no options\n{__doc__}")
try:
    import torch, rss_torch
    from torch.profiler import profile, ProfilerActivity
except ImportError as e:  # exit 3 without torch, as eager.py
    print(f"diag_eager.py: {e} (pip install --no-build-isolation ./python installs rss_torch)", file=sys.stderr)
    sys.exit(3)

def ev(call, warm=10, it=60):
    for _ in range(warm): call()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    evs, hs = [], []
    for _ in range(it):
        t0 = time.perf_counter(); s.record(); call(); e.record(); e.synchronize()
        hs.append((time.perf_counter() - t0) * 1e6); evs.append(s.elapsed_time(e) * 1e3)
    return statistics.median(evs), statistics.median(hs)

def issue(call, n=400):
    for _ in range(20): call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n): call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6

op = torch.ops.rss.rms_scaled_softmax.default
bop = torch.ops.rss.rms_scaled_softmax_backward.default
def variants(x, xg, dy, stats):
    return {
        "empty_x2": lambda: (torch.empty_like(x), torch.empty(x.shape[:-1] + (3,), device=x.device)),
        "torch_neg": lambda: torch.neg(x),
        "torch_softmax_fwd": lambda: torch.softmax(x, -1),
        "torch_softmax_fwdbwd": lambda: torch.autograd.grad(torch.softmax(xg, -1), xg, dy)[0],
        "torch_softmax_fwd_backward()": lambda: torch.softmax(xg, -1).backward(dy),
        "rss_fwd": lambda: rss_torch.rms_scaled_softmax(x),
        "rss_op_fwd": lambda: op(x),
        "rss_fwd_with_grad": lambda: rss_torch.rms_scaled_softmax(xg),
        "rss_op_bwd": lambda: bop(x, stats, dy),
        "rss_fwdbwd": lambda: torch.autograd.grad(rss_torch.rms_scaled_softmax(xg), xg, dy)[0],
        "rss_fwd_backward()": lambda: rss_torch.rms_scaled_softmax(xg).backward(dy),
    }

for rows, cols, dt in ((8, 4096, torch.bfloat16), (32, 128256, torch.bfloat16), (4096, 32768, torch.bfloat16), (4096, 4096, torch.float32)):
    x = torch.randn(rows, cols, device="cuda").to(dt); dy = torch.randn_like(x); xg = x.clone().requires_grad_(True)
    stats = op(x)[1]
    print(f"\n{rows}x{cols} {dt}: variant, event us, host us, host issue us per call (no sync)")
    for name, call in variants(x, xg, dy, stats).items():
        e, h = ev(call)
        i = issue(call) if rows * cols <= 1 << 22 else float("nan")
        print(f"  {name:30s} {e:8.1f} {h:8.1f} {i:8.1f}")
        xg.grad = None
    sys.stdout.flush()

for rows, cols, dt, name in ((32, 128256, torch.bfloat16, "rss_fwdbwd"), (4096, 32768, torch.bfloat16, "rss_fwd")):
    x = torch.randn(rows, cols, device="cuda").to(dt); dy = torch.randn_like(x); xg = x.clone().requires_grad_(True)
    call = variants(x, xg, dy, op(x)[1])[name]
    for _ in range(10): call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20): call()
        torch.cuda.synchronize()
    print(f"\nprofile {name} {rows}x{cols} {dt}, 20 calls")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70))
