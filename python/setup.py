"""Builds rss_torch's C++/CUDA extension ahead of time with torch's BuildExtension (see pyproject.toml).

The rss headers the extension needs are copied into the package (rss_torch/include) from the repository's
include/ when building from a checkout, so that neither the build nor the installed package points back into
the repository; an sdist carries the copy. Architectures: TORCH_CUDA_ARCH_LIST when it is set (torch's own
variable), else 8.0, 9.0, 10.0 and PTX. The thread-block cluster kernels (cluster_row, forward and backward)
exist only in the sm_90 and newer code; on other GPUs rss's automatic chooses among the strategies that exist.
"""
import os
import shutil

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "rss_torch")
HEADERS = os.path.join(PACKAGE, "include")
REPOSITORY_HEADERS = os.path.join(HERE, "..", "include", "rss")
DEFAULT_ARCHITECTURES = "8.0;9.0;10.0+PTX"


def copy_headers():
    """rss_torch/include/rss from the repository's include/rss (a checkout), or as the sdist carries it."""
    target = os.path.join(HEADERS, "rss")
    if os.path.isdir(REPOSITORY_HEADERS):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(REPOSITORY_HEADERS, target)
    if not os.path.isfile(os.path.join(target, "rss.cuh")):
        raise SystemExit("rss_torch: the rss headers are missing: build from an rss checkout (python/ beside "
                         "include/) or from an sdist that carries rss_torch/include")


def torch_cxx_runtime():
    """The shared C++ runtime (libstdc++.so.6) that torch's libraries run with, as a path to link against, or
    None. Linked first, it defines every C++ library symbol the extension needs, so a compiler that would link
    libstdc++ statically (Python's own build compiler may: sysconfig's CXX, which setuptools uses) has nothing
    left to pull from its archive. A second, static C++ runtime in the process crashed it: on the H200 machine
    (torch 2.11, 2026-12-02) the extension carried one, and formatting a number in an error message segfaulted
    in that copy's std::ostream code."""
    import torch  # noqa: F401  (its libraries, and the C++ runtime they need, are now mapped)

    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libstdc++.so"):
                    return path
    except OSError:  # no /proc: leave the runtime to the compiler
        pass
    return None


def extension():
    # torch is imported here, not at the top: `setup.py --help` and metadata queries work without it.
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCHITECTURES)  # read by BuildExtension
    csrc = os.path.join("rss_torch", "csrc")
    ext = CUDAExtension(
        name="rss_torch._C",
        sources=[os.path.join(csrc, f) for f in ("ops.cpp", "fp32.cu", "bf16.cu", "fp16.cu")],
        include_dirs=[HEADERS, os.path.join(HERE, csrc)],
        extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "-std=c++17"]},
        extra_link_args=[runtime] if (runtime := torch_cxx_runtime()) else [],
    )
    return [ext], {"build_ext": BuildExtension}


copy_headers()
ext_modules, cmdclass = extension()
setup(ext_modules=ext_modules, cmdclass=cmdclass,
      package_data={"rss_torch": ["include/rss/**/*", "csrc/*"]})
