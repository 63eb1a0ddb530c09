"""rss_torch in a few lines: the operator's forward, its backward through autograd, and torch.compile.

    pip install --no-build-isolation ./python      # once, from the repository's root
    python3 examples/03_pytorch/example.py         # needs a CUDA GPU
"""
import sys

if sys.argv[1:2] in (["-h"], ["--help"]):
    sys.exit(print(__doc__))
try:
    import torch
    import rss_torch
except ImportError as e:
    sys.exit(f"example.py: {e} (pip install --no-build-isolation ./python installs rss_torch; it needs torch with CUDA)")
if not torch.cuda.is_available():
    sys.exit("example.py: no CUDA device")

x = torch.randn(32, 128256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
y = rss_torch.rms_scaled_softmax(x)                 # rows = all but the last dimension
y.backward(torch.randn_like(y))                     # x.grad from rss's backward (x and 12 bytes a row saved, not y)
compiled = torch.compile(rss_torch.RmsScaledSoftmax(), fullgraph=True)
same = torch.equal(compiled(x.detach()), y.detach())
error = ((y.float() - rss_torch.composed(x.detach().double()).float()).norm(dim=-1) /
         rss_torch.composed(x.detach().double()).float().norm(dim=-1)).max().item()
print(f"y {tuple(y.shape)} {y.dtype}: row sums {y.float().sum(-1).min().item():.4f}..{y.float().sum(-1).max().item():.4f}, "
      f"worst row error against float64 {error:.2e}; x.grad {tuple(x.grad.shape)}; compiled call identical: {same}")
sys.exit(0 if same and error < 1e-2 else 1)
