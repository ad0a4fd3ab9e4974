"""kubectl-tao: run NVIDIA TAO and PyTorch-style GPU container jobs on Kubernetes with kubectl."""

__version__ = "0.1.0"
