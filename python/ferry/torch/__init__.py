"""ferry.torch: a PyTorch training script as a ferry worker.

    import ferry.torch as ft
    with ft.join(model, opt) as job:            # FERRY_COORDINATOR or coordinator=
        for x, y in job.batches(train_dataset): # this worker's share of a step
            loss = F.cross_entropy(model(x), y)
            job.backward(loss)                  # gradients leave as they are ready
            job.step()                          # the step is applied

The same script trains in every mode of the job (PS, ring): the job
decides, the script does not. The worker protocol (coordinator, shards, ring)
is ferry's C++ (ferry._ferry); the model's parameters and gradients live in
its flat buffers, so nothing is copied between torch and ferry. See
docs/pytorch.md for the semantics and what is refused.
"""

from ferry.torch._job import Job, epoch_permutation, join

__all__ = ["Job", "epoch_permutation", "join"]
