"""kubectl-tao NCCL probe: all_reduce across every GPU of every node of an Indexed Job, with a deadline.

Run by `kubectl tao probe nccl` as `torchrun --no-python python3 -c <this text> SIZE_MIB ITERATIONS
TIMEOUT_S`: the text travels as one argument of the container (never pasted into shell text), and
torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each process it starts.
Every process prints what it runs on and whether the sum was right; rank 0 also prints the bus
bandwidth of the timed calls. Exit 0 when every element of the first reduced tensor of ones equals
the number of processes, 1 when the sum is wrong; an NCCL error or a process-group timeout ends the
process with torch's own non-zero exit.

Without a CUDA device, or with a torch built without NCCL, the processes fall back to gloo on CPU and
say so on every line: such a pass shows that the pods, DNS and TCP between the nodes work, and nothing
about NCCL. The last line of each process names the backend (`result ok backend=gloo`), which is how
`kubectl tao probe nccl` tells the two apart.
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def pick_backend() -> tuple[str, str]:
    """("nccl", "") when this process has a CUDA device and torch has NCCL; else ("gloo", why not)."""
    if not torch.cuda.is_available():
        return "gloo", "no CUDA device is visible"
    if not dist.is_nccl_available():
        return "gloo", "this torch was built without NCCL"
    return "nccl", ""


def main() -> int:
    size_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    timeout_s = int(sys.argv[3]) if len(sys.argv) > 3 else 120
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    node = os.environ.get("NODE_NAME", "unknown")
    backend, why = pick_backend()
    nccl = backend == "nccl"
    if nccl:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    if nccl:
        version = torch.cuda.nccl.version()  # a tuple such as (2, 21, 5); an int in old releases
        text = ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)
        where = f"GPU {local_rank}, torch {torch.__version__}, NCCL {text}"
    else:
        where = f"CPU, torch {torch.__version__}, backend gloo ({why}): NCCL is NOT exercised"
    print(f"nccl-probe: rank {rank}/{world} on {node} {where}", flush=True)
    device = "cuda" if nccl else "cpu"
    elements = size_mib * 1024 * 1024 // 4
    tensor = torch.ones(elements, dtype=torch.float32, device=device)
    dist.all_reduce(tensor)  # the first call also builds the communicator
    if nccl:
        torch.cuda.synchronize()
    correct = bool(torch.all(tensor == float(world)).item())  # whole numbers: exact in float32
    started = time.monotonic()
    for _ in range(iterations):  # timing only: the values are not checked again
        dist.all_reduce(tensor)
    if nccl:
        torch.cuda.synchronize()
    seconds = (time.monotonic() - started) / max(iterations, 1)
    if rank == 0:
        # bus bandwidth as nccl-tests reports it for all_reduce: algbw * 2 (n - 1) / n
        bus = size_mib / 1024 / seconds * 2 * (world - 1) / world
        units = "GPUs" if nccl else "CPU processes (gloo, not NCCL)"
        print(f"nccl-probe: all_reduce of {size_mib} MiB over {world} {units}: {seconds * 1000:.1f} ms, "
              f"bus bandwidth {bus:.2f} GiB/s", flush=True)
    print(f"nccl-probe: rank {rank} result {'ok' if correct else 'WRONG'} backend={backend}", flush=True)
    dist.destroy_process_group()
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
