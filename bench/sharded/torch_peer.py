#!/usr/bin/env python3
"""Peer `torch_distributed` of the sharded bench: the operator written the way a PyTorch user would write
it over a tensor-parallel group (torch.distributed, NCCL process group, one process per GPU), on the same
shapes and the same column split as bench/sharded/sharded_bench.cu:

    m_g, s_g = max and sum of squares of the local shard         (fp32 arithmetic)
    all_gather_into_tensor of the stacked (m_g, s_g)            -> m = max, s = sum, r = rsqrt(s/cols + eps)
    e = exp(r (x - m)), Z_g = sum e;  all_reduce(Z)             -> y = e / Z

Host completion time per call: every rank synchronises, meets the others at a barrier, then times
launch -> torch.cuda.synchronize(); a sample is the slowest rank's time. Accuracy: rows 0, rows/2,
rows-1 and up to 5 more of the gathered output against a float64 reference of the whole row.

    python3 bench/sharded/torch_peer.py [--shapes 32x128256,...] [--dtypes fp32,bf16] [--rounds 5]
                                        [--samples 20] [--warmup 5] [--out torch_records.json]
"""
import argparse
import json
import os
import random
import socket
import time

# NVLink multicast stays off in every process this starts.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

# torch is imported by import_torch() after the arguments are parsed, so that --help works without it.
torch = dist = None
EPS = 1e-5


def import_torch():
    """Binds the module-level torch and dist (in main and in every spawned worker)."""
    global torch, dist
    import torch
    import torch.distributed as dist


def sharded_rms_scaled_softmax(x, global_cols, world):
    xf = x.float()
    stats = torch.stack([xf.amax(dim=1), (xf * xf).sum(dim=1)])  # 2 x rows
    gathered = torch.empty((world,) + tuple(stats.shape), dtype=stats.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, stats)
    m = gathered[:, 0].amax(dim=0)
    r = torch.rsqrt(gathered[:, 1].sum(dim=0) / global_cols + EPS)
    e = torch.exp((xf - m[:, None]) * r[:, None])
    z = e.sum(dim=1)
    dist.all_reduce(z)
    return (e / z[:, None]).to(x.dtype)


def widths_of(cols, world):
    w = [cols // world] * world
    for r in range(cols % world):
        w[r] += 1
    return w


def worker(rank, world, port, args, out_path):
    import_torch()
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    records = []
    gen = torch.Generator(device="cuda")
    for shape in args.shapes.split(","):
        rows, cols = (int(v) for v in shape.split("x"))
        widths = widths_of(cols, world)
        c0 = sum(widths[:rank])
        for dt in args.dtypes.split(","):
            dtype = dtypes[dt]
            gen.manual_seed(args.seed + rows * 1000003 + cols)  # the same whole matrix on every rank
            scale = 0.25 + 3.75 * torch.rand((rows, 1), generator=gen, device="cuda")
            offset = -4.0 + 8.0 * torch.rand((rows, 1), generator=gen, device="cuda") / 2
            x_full = (scale * (-4.0 + 8.0 * torch.rand((rows, cols), generator=gen, device="cuda") + offset)).to(dtype)
            x_full[x_full == 0] = 1e-3
            x = x_full[:, c0:c0 + widths[rank]].contiguous()
            samples = []
            rounds = []
            for rnd in range(args.rounds):
                for _ in range(args.warmup):
                    y = sharded_rms_scaled_softmax(x, cols, world)
                torch.cuda.synchronize()
                for _ in range(args.samples):
                    torch.cuda.synchronize()
                    dist.barrier()
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    y = sharded_rms_scaled_softmax(x, cols, world)
                    torch.cuda.synchronize()
                    samples.append((time.perf_counter() - t0) * 1e6)
                    rounds.append(rnd)
            # The slowest rank's time per sample.
            t = torch.tensor(samples, dtype=torch.float64, device="cuda")
            all_t = [torch.empty_like(t) for _ in range(world)]
            dist.all_gather(all_t, t)
            worst = torch.stack(all_t).amax(dim=0).tolist()
            # Accuracy on a few rows of the gathered output.
            rng = random.Random(args.seed + rows + cols)
            check = sorted({0, rows // 2, rows - 1} | {rng.randrange(rows) for _ in range(5)})
            mine = y[check].float().contiguous()
            parts = [torch.empty((len(check), w), dtype=torch.float32, device="cuda") for w in widths]
            dist.all_gather(parts, mine)
            got = torch.cat(parts, dim=1).double()
            ref_in = x_full[check].double()
            m = ref_in.amax(dim=1, keepdim=True)
            r = torch.rsqrt((ref_in * ref_in).mean(dim=1, keepdim=True) + EPS)
            e = torch.exp(r * (ref_in - m))
            ref = e / e.sum(dim=1, keepdim=True)
            err = ((got - ref).norm(dim=1) / ref.norm(dim=1)).max().item()
            if rank == 0:
                rec = {"rows": rows, "cols": cols, "dtype": dt, "world": world, "variant": "torch_distributed",
                       "detail": f"torch {torch.__version__}, all_gather_into_tensor + all_reduce, eager",
                       "status": "ok", "max_rel_err": err,
                       "uuids": [str(torch.cuda.get_device_properties(i).uuid) for i in range(world)],
                       "samples_us": [round(v, 3) for v in worst], "round_of_sample": rounds}
                records.append(rec)
                srt = sorted(worst)
                print(f"{rows:6d} x {cols:<9d} {dt} torch_distributed {srt[len(srt) // 2]:10.2f} us  err {err:.3g}",
                      flush=True)
            del x_full, x, y
            torch.cuda.empty_cache()
    if rank == 0:
        ctx = {"tool": "torch_peer.py", "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "gpus": ",".join(torch.cuda.get_device_name(i) for i in range(world)), "world": world,
               "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", ""), "seed": args.seed, "rounds": args.rounds,
               "samples": args.samples, "warmup": args.warmup, "time": int(time.time())}
        with open(out_path, "w") as f:
            json.dump({"context": ctx, "records": records}, f, indent=1)
        print(f"wrote {out_path} ({len(records)} records)")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="32x128256,4096x128256,64x131072,1x16777216")
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--world", type=int, default=0, help="processes (default: every GPU, at most 8)")
    p.add_argument("--out", default="torch_records.json")
    args = p.parse_args()
    import_torch()
    import torch.multiprocessing as mp
    world = args.world or min(torch.cuda.device_count(), 8)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(world, port, args, args.out), nprocs=world, join=True)


if __name__ == "__main__":
    main()
