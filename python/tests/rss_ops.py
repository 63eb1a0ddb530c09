"""What the test modules share: torch (or, without it, a skip of the whole module that says why), the installed
package's operators and the mark of the cases that need a CUDA device. Imported first by each test module."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the PyTorch operator's tests need torch")

import rss_torch  # noqa: E402,F401  (the installed package: pip install --no-build-isolation ./python)

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: this case needs one")
FORWARD = torch.ops.rss.rms_scaled_softmax
BACKWARD = torch.ops.rss.rms_scaled_softmax_backward
