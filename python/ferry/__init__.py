"""ferry: a distributed training service (parameter servers and ring
all-reduce). This package lets a Python training script be a ferry worker:
see ferry.torch (docs/pytorch.md)."""
