"""What the forward's and the backward's torch peers share: torch found with a GPU, and the timer. Torch-free at
import, so the peers' --help works without torch."""
import sys
import time

EXIT_NO_TORCH = 3  # the peers' exit code when torch or its GPU is missing


def torch_with_cuda(program):
    """The torch module when it is installed and sees a CUDA device; else None, after saying why on stderr."""
    try:
        import torch
    except ImportError as e:
        print(f"{program}: torch is not installed ({e}); these peers need torch with CUDA and an NVIDIA GPU",
              file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{program}: torch has no usable CUDA device; these peers need torch with CUDA and an NVIDIA GPU",
              file=sys.stderr)
        return None
    return torch


def time_call(call, iterations, synchronize, begin, end):
    """`iterations` host samples of call() in us (launch to synchronize(), which waits for the device), then one
    batched event interval: all iterations between two recorded events, divided by their count (it can include host
    supply gaps; it is not pure device time). begin, end: CUDA events with timing. Returns (host samples, interval)."""
    host = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        call()
        synchronize()
        host.append((time.perf_counter() - t0) * 1e6)
    begin.record()
    for _ in range(iterations):
        call()
    end.record()
    end.synchronize()
    return host, begin.elapsed_time(end) * 1e3 / iterations
