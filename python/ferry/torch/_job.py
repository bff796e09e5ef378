"""ferry.torch's Job: one PyTorch training process as a worker of a ferry job.

How a step runs (docs/pytorch.md):
  - job.batches(ds) asks ferry's worker (C++, ferry._ferry) for the next
    lease; while it waits, ferry writes the weights of the step into the
    model's parameters (a PS pull or the ring's state), which are views of
    ferry's flat parameter buffer. It yields ds[i] of the lease's samples,
    collated.
  - job.backward(loss): loss.backward(); each parameter's gradient lands in
    ferry's flat gradient buffer (its .grad is a view of it) and a hook on
    its gradient accumulator declares its range final, so ferry pushes it
    (PS) or all-reduces it (ring) while backward goes on.
  - job.step(): ferry finishes the step's exchange (PS: every push
    accepted; ring: every bucket reduced and the update applied) and says
    whether the step was applied.
The user's code never runs while ferry writes the parameters.
"""

import contextlib
import json
import math
import os
import signal
import sys
import threading
import time

import torch
from torch.utils.data import default_collate

from ferry import _ferry
from ferry.torch._optim import check_optimizer, job_updates, optimizer_spec

_MODES = {"MODE_PS": "ps", "MODE_RING": "ring", "MODE_HYBRID": "hybrid"}


def epoch_permutation(n, seed, epoch):
    """The order (an int64 tensor) in which epoch `epoch` of a job with seed
    `seed` visits samples [0, n): the permutation ferry's coordinator cuts
    into leases, so a single-process script can replay a job's order."""
    return torch.frombuffer(bytearray(_ferry.epoch_permutation(n, seed, epoch)),
                            dtype=torch.int64)


def join(model, optimizer=None, coordinator=None, *, scheduler=None,
         scheduler_interval="step", timeout=120.0, rpc_timeout=30.0, peer_listen="",
         peer_advertise=""):
    """Joins the job of the coordinator at `coordinator` (HOST:PORT; default
    the FERRY_COORDINATOR environment variable) as a worker training `model`.
    The ring peer service listens on `peer_listen` (default
    FERRY_PEER_LISTEN, else 0.0.0.0:0) and is reached at `peer_advertise`
    (default FERRY_PEER_ADVERTISE, else this host's name and the bound port).

    The model's parameters must be the job's tensors (same names and shapes,
    float32); from now on they are views of ferry's flat buffer and hold the
    job's weights.

    `optimizer` (SGD, Adam or AdamW, with parameter groups) and `scheduler`
    (a torch lr_scheduler, stepped once per step or, with
    scheduler_interval="epoch", once per epoch) are the job's optimizer in a
    job whose model this worker defines (--model external): the shards or
    the ring members apply what they compute. Otherwise they must compute
    what the job's optimizer does (checked setting by setting). The script
    never calls optimizer.step() or scheduler.step() for ferry. Returns a
    Job, a context manager that leaves the job on exit.

    The process's operations come from the environment, as ferry-worker's
    flags do: FERRY_HEALTH_PORT (grpc.health.v1: ready while the
    coordinator answers, draining after SIGTERM), FERRY_METRICS_PORT
    (Prometheus), FERRY_TLS_CERT / FERRY_TLS_KEY / FERRY_TLS_CA /
    FERRY_TLS_SERVER_NAME / FERRY_REQUIRE_CLIENT_CERT, FERRY_AUTH_TOKEN_FILE,
    FERRY_LOG_LEVEL, FERRY_LOG_FORMAT, FERRY_OPS_PORT_FILE; they are set up
    by the first join of the process.

    Raises ValueError for a model or optimizer the job cannot train (the
    message names the first difference), a bad FERRY_* variable, or a
    missing coordinator address,
    ConnectionError / TimeoutError when the coordinator cannot be reached
    within `timeout` seconds, RuntimeError when it refuses the worker.
    """
    coordinator = coordinator or os.environ.get("FERRY_COORDINATOR", "")
    if not coordinator:
        raise ValueError("no coordinator: pass coordinator='HOST:PORT' or set FERRY_COORDINATOR")
    peer_listen = peer_listen or os.environ.get("FERRY_PEER_LISTEN", "")
    peer_advertise = peer_advertise or os.environ.get("FERRY_PEER_ADVERTISE", "")
    # This process's logging, RPC security and health/metrics ports, from
    # the FERRY_* environment as ferry-worker's flags (docs/pytorch.md).
    _ferry.configure_process(coordinator)
    # Checked before joining, so that a worker the job cannot use never
    # becomes a member.
    spec = json.loads(_ferry.get_job(coordinator, timeout))
    ours = _job_optimizer(spec, model, optimizer, scheduler, scheduler_interval)
    if spec.get("model_from_worker") and not spec.get("tensors"):
        spec = _define_model(coordinator, spec, model, timeout, ours)
    if ours is not None:
        check_optimizer(ours, spec.get("optimizer", {}))
    _match_tensors(model, [(t["name"], tuple(int(d) for d in t.get("shape", [])))
                           for t in spec.get("tensors", [])])
    worker = _ferry.Worker(coordinator, rpc_timeout, peer_listen, peer_advertise)
    try:
        joined = json.loads(worker.join(timeout))
        if joined.get("job_id") != spec.get("job_id"):
            raise RuntimeError(f"the coordinator's job changed while joining "
                               f"({spec.get('job_id')} -> {joined.get('job_id')})")
        return Job(worker, joined, model, optimizer)
    except BaseException:
        with contextlib.suppress(Exception):
            worker.stop()
        raise


def _job_optimizer(spec, model, optimizer, scheduler, interval):
    """The OptimizerSpec (JSON dict) of `optimizer` and `scheduler` for the
    job `spec`; None without an optimizer. ValueError for a scheduler the
    job cannot take."""
    if optimizer is None:
        if scheduler is not None:
            raise ValueError("a scheduler needs its optimizer: pass optimizer= too")
        return None
    updates, per_epoch = 0, 0
    if scheduler is not None:
        if not spec.get("model_from_worker"):
            raise ValueError("a torch lr_scheduler sets the job's rates only in a job whose "
                             "model its worker defines (--model external); this job's "
                             "schedule is its own (--lr-schedule)")
        if spec.get("mode", "MODE_PS") == "MODE_PS" and \
                spec.get("consistency", "CONSISTENCY_SYNC") != "CONSISTENCY_SYNC":
            raise ValueError("a torch lr_scheduler needs sync steps (--mode ring, or "
                             "--consistency sync): async updates have no step index")
        updates, per_epoch = job_updates(spec)
    return optimizer_spec(optimizer, model, scheduler, interval, updates, per_epoch)


def _define_model(coordinator, spec, model, timeout, optimizer=None):
    """Offers `model` as the model of a job started with --model external
    (its parameters in named_parameters() order, then its buffers in
    named_buffers() order, with their current values), then waits until the
    job has a model (this one, or the one another worker defined first).
    `optimizer` (an OptimizerSpec's JSON dict, or None) becomes the job's
    optimizer when this definition is the job's model. The job's spec with
    its tensors."""
    params = list(model.named_parameters())
    buffers = _persistent_buffers(model)
    if not params:
        raise ValueError("the model has no parameters")
    for name, p in params:
        _check_tensor(name, p)
    for name, b in buffers:
        _check_tensor(name, b, buffer=True)
    tensors = [(name, list(p.shape), False) for name, p in params] + \
        [(name, list(b.shape), True) for name, b in buffers]
    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1).float()
                          for _, t in params + buffers]).contiguous()
    # Defined by this worker, or by another (whose claim lapses if it dies:
    # then this one defines it); the coordinator starts the job once it is.
    deadline = time.monotonic() + timeout
    offered = None
    while True:
        if offered is None or time.monotonic() - offered >= 1.0:
            _ferry.define_model(coordinator, spec["job_id"], tensors, flat.numpy(), timeout,
                                json.dumps(optimizer) if optimizer is not None else "")
            offered = time.monotonic()
        spec = json.loads(_ferry.get_job(coordinator, timeout))
        if spec.get("tensors"):
            return spec
        if time.monotonic() > deadline:
            raise TimeoutError(f"the job's model was not defined within {timeout} s")
        time.sleep(0.1)


def _persistent_buffers(model):
    """The buffers of the model's state_dict (not those registered with
    persistent=False, which stay each worker's own), by name."""
    kept = set(model.state_dict().keys())
    return [(name, b) for name, b in model.named_buffers() if name in kept]


def _check_tensor(name, t, buffer=False):
    """ValueError unless `t` can be one of a job's tensors: float32 on the
    CPU (a buffer may also be an integer counter, which the job carries as
    float32: BatchNorm's num_batches_tracked)."""
    if t.device.type != "cpu":
        raise ValueError(f"tensor {name} is on {t.device}; ferry.torch trains on the CPU")
    if not buffer and not t.requires_grad:
        raise ValueError(f"parameter {name} does not require grad; ferry.torch trains "
                         "every parameter (make a frozen one a buffer)")
    if t.dtype == torch.float32 or (buffer and not t.is_floating_point()
                                    and not t.is_complex()):
        return
    kind = "buffers" if buffer else "parameters"
    raise ValueError(f"tensor {name} is {t.dtype}; ferry trains float32 {kind}")


def _match_tensors(model, tensors):
    """The model's tensors in the order of the job's `tensors` ((name, shape)
    pairs): [(tensor, is_buffer)], the buffers (BatchNorm statistics) after
    every parameter. ValueError naming the first tensor that does not
    match."""
    params = dict(model.named_parameters())
    buffers = dict(_persistent_buffers(model))
    job_names = {name for name, _ in tensors}
    for name in list(params) + list(buffers):
        if name not in job_names:
            listed = ", ".join(n for n, _ in tensors[:4])
            raise ValueError(f"model {'parameter' if name in params else 'buffer'} {name} is "
                             f"not one of the job's tensors ({listed}"
                             f"{', ...' if len(tensors) > 4 else ''})")
    matched = []
    for name, shape in tensors:
        is_buffer = name in buffers
        if name not in params and not is_buffer:
            raise ValueError(f"the job's tensor {name} is not a tensor of the model")
        if matched and matched[-1][1] and not is_buffer:
            raise ValueError(f"the job's tensor {name} (a parameter) follows a buffer: "
                             "buffers must come after every parameter")
        t = buffers[name] if is_buffer else params[name]
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"tensor {name}: the model's shape {tuple(t.shape)} "
                             f"differs from the job's {tuple(shape)}")
        _check_tensor(name, t, buffer=is_buffer)
        matched.append((t, is_buffer))
    return matched


class Job:
    """A joined ferry job (see join). Not thread-safe: one training thread."""

    def __init__(self, worker, spec, model, optimizer):
        self._worker = worker
        self.spec = spec
        self.mode = _MODES.get(spec.get("mode", "MODE_PS"), spec.get("mode"))
        self._tensors = [(name, tuple(shape), offset, numel)
                         for name, shape, offset, numel in worker.tensors()]
        self._flat_params = torch.frombuffer(worker.params(), dtype=torch.float32)
        self._flat_grads = torch.frombuffer(worker.grads(), dtype=torch.float32)
        self._model = model
        self._bind(model)
        self._evaluate = None     # job.evaluate's fn
        self.evaluations = []     # what this worker evaluated, oldest first
        self._open = False        # a batch was handed out, step() not called yet
        self._sent = False        # this step's gradients were declared
        self._no_sync = False
        self._batch = 0
        self._loss_sum = 0.0
        self._backwards = 0
        self.steps = 0            # steps applied with this worker
        self.summary = None       # the worker's summary, after close()
        self._stop_requested = False
        self._previous_sigterm = None
        self._catch_sigterm()

    # ---- setup ----
    def _bind(self, model):
        matched = _match_tensors(model, [(name, shape) for name, shape, _, _ in self._tensors])
        self._views = []  # (parameter, offset, numel, grad view), in flat order
        # Buffers: the flat buffer's last tensors. A float32 buffer's
        # storage becomes a view of it (BatchNorm updates it in place); the
        # tensor keeps its own version counter, so one layer's update is not
        # another's. An integer one (num_batches_tracked) stays the module's
        # and is copied each step.
        self._state_begin = None
        self._int_buffers = []  # (buffer, offset, numel)
        unset = []  # a parameter's .grad was None before ferry's view
        for (t, is_buffer), (name, shape, offset, numel) in zip(matched, self._tensors):
            view = self._flat_params[offset:offset + numel].view(shape)
            if is_buffer:
                if self._state_begin is None:
                    self._state_begin = offset
                if t.dtype == torch.float32:
                    with torch.no_grad():
                        t.data = view
                else:
                    self._int_buffers.append((t, offset, numel))
                continue
            grad = self._flat_grads[offset:offset + numel].view(shape)
            with torch.no_grad():
                t.data = view
            unset.append(t.grad is None)
            t.grad = grad
            self._views.append((t, offset, numel, grad))
        self._state_before = None
        self._declared = [False] * len(self._views)
        self._used = [False] * len(self._views)  # a backward reached it
        # Its .grad was None in the step (as torch would keep it: a fresh
        # model's, or set so by zero_grad(set_to_none=True) before the step,
        # after the last one, or between a batch and job.backward).
        self._unset = [False] * len(self._views)
        self._unset_next = unset  # the next step's, from before it began
        # A hook on each parameter's gradient accumulator: it runs once per
        # backward, after the parameter's gradient was summed into .grad.
        self._accumulators = []
        for index, (p, _, _, _) in enumerate(self._views):
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(index))
            self._accumulators.append(accumulator)

    def _make_hook(self, index):
        def hook(*unused):
            if not self._open:
                return
            self._used[index] = True
            if not self._no_sync and not self._declared[index]:
                self._declare(index)
        return hook

    def _declare(self, index, absent=False):
        self._declared[index] = True
        _, offset, numel, _ = self._views[index]
        self._worker.ready(offset, numel, absent)

    def _declare_rest(self):
        """Declares every range no hook declared (parameters the step did not
        use: their gradient is zero), then the buffers' change. A parameter
        that no backward of the step reached and whose .grad the script had
        set to None (zero_grad(set_to_none=True)) is absent, as its .grad
        would stay None in torch: when every worker of the step leaves it
        out, the job's optimizer skips it (no momentum, no weight decay).
        Only in a job whose model its workers define: a ring of ferry's own
        model does not agree on absent ranges, and a script must train
        alike in every mode, so there they are zeros."""
        may_skip = bool(self.spec.get("model_from_worker"))
        for index in range(len(self._views)):
            if not self._declared[index]:
                unused = self._unset[index] and not self._used[index]
                self._declare(index, absent=may_skip and unused)
        self._declare_state()
        self._sent = True

    def _declare_state(self):
        """The buffers ride with the gradient as ferry's own BatchNorm jobs'
        do (docs/models.md): their "gradient" is this step's change (ferry
        weighs it by the step's samples), and they go back to the step's
        starting values, to which the job adds the contributors' mean
        change."""
        if self._state_begin is None:
            return
        state = self._flat_params[self._state_begin:]
        with torch.no_grad():
            now = state.clone()
            for buf, offset, numel in self._int_buffers:
                at = offset - self._state_begin
                now[at:at + numel] = buf.reshape(-1).float()
            self._flat_grads[self._state_begin:] = now - self._state_before
            state.copy_(self._state_before)
        self._worker.ready(self._state_begin, state.numel())

    # ---- the training loop ----
    def batches(self, dataset, batch_transform=None, collate_fn=None):
        """Yields the batches of the leases the coordinator hands this worker
        until the job ends: collate_fn([dataset[i] for i in the lease's
        samples]) (default: torch's default_collate), then batch_transform.
        Each batch is one step: call job.backward(loss) and job.step()
        before asking for the next."""
        size = len(dataset)
        dataset_spec = self.spec.get("dataset", "")
        if dataset_spec.startswith("external:") and size != int(dataset_spec[9:]):
            raise ValueError(f"len(dataset) is {size}; the job's dataset is "
                             f"{dataset_spec} ({dataset_spec[9:]} samples an epoch)")
        collate = collate_fn or default_collate
        while True:
            if self._open:
                raise RuntimeError("the previous batch's step is open: call job.step() "
                                   "before the next batch")
            lease = False
            while lease is False and not self._stop_requested:
                lease = self._worker.next_lease(size, 0.25)  # signals between waits
            if lease is None or lease is False:  # the job ended, or SIGTERM
                return
            _, _, raw, evaluation = lease
            if evaluation is not None:
                self._run_evaluation(*evaluation)
            if not raw:  # an evaluation alone
                continue
            indices = torch.frombuffer(bytearray(raw), dtype=torch.int64).tolist()
            batch = collate([dataset[i] for i in indices])
            if batch_transform is not None:
                batch = batch_transform(batch)
            self._begin(len(indices))
            yield batch

    def _begin(self, samples):
        self._open = True
        self._sent = False
        self._batch = samples
        self._loss_sum = 0.0
        self._backwards = 0
        self._declared = [False] * len(self._views)
        self._used = [False] * len(self._views)
        self._unset = [was or p.grad is None
                       for was, (p, _, _, _) in zip(self._unset_next, self._views)]
        self._unset_next = [False] * len(self._views)
        if self._state_begin is not None:  # the step's starting buffers
            self._load_int_buffers()
            with torch.no_grad():
                self._state_before = self._flat_params[self._state_begin:].clone()
        for p, _, _, grad in self._views:  # ferry zeroed the flat gradients
            if p.grad is not grad:
                p.grad = grad

    def _load_int_buffers(self):
        """The integer buffers (BatchNorm's counters) from the flat buffer."""
        with torch.no_grad():
            for buf, offset, numel in self._int_buffers:
                buf.copy_(self._flat_params[offset:offset + numel]
                          .view(buf.shape).round().to(buf.dtype))

    # ---- evaluation ----
    def evaluate(self, fn, every="epoch"):
        """Has `fn(model)` evaluate the job's weights at the end of every
        epoch and at the job's end, on one worker of the job that called
        evaluate (the others train on; sync jobs wait for it, so the
        weights are exactly those of that step). `fn` returns
        {"accuracy": a, "loss": l} (numbers or 0-d tensors; a in [0, 1]);
        the figures become the job's evaluations, as ferry status, the
        summary JSON, the metrics and TensorBoard show them. It runs under
        torch.no_grad() with the model as the job holds it; whatever it
        changes (train/eval mode, buffers) is put back afterwards. Only a
        job whose model its worker defines (--model external) takes it:
        ferry scores its own models itself."""
        if not callable(fn):
            raise ValueError("evaluate(fn): fn must be callable as fn(model)")
        if every != "epoch":
            raise ValueError(f"evaluate(every={every!r}): only every='epoch' is supported "
                             "(each epoch's end, and the job's end)")
        if not self.spec.get("model_from_worker"):
            raise ValueError("job.evaluate is for a job whose model its worker defines "
                             "(--model external); this job's model is ferry's own, "
                             "which the coordinator evaluates on its test set")
        self._evaluate = fn
        self._worker.set_evaluates(True)

    def _run_evaluation(self, version, epoch, final):
        """Runs fn on the weights ferry wrote (those of `version`) and
        reports its figures; the model's state is put back afterwards."""
        if self._evaluate is None:
            raise RuntimeError("the job handed this worker an evaluation, but "
                               "job.evaluate(fn) was not called")
        self._load_int_buffers()
        saved = self._flat_params.clone()
        saved_ints = [buf.clone() for buf, _, _ in self._int_buffers]
        was_training = self._model.training
        began = time.monotonic()
        try:
            with torch.no_grad():
                figures = self._evaluate(self._model)
        finally:
            self._model.train(was_training)
            with torch.no_grad():
                self._flat_params.copy_(saved)
                for (buf, _, _), value in zip(self._int_buffers, saved_ints):
                    buf.copy_(value)
        accuracy, loss = _evaluation_figures(figures)
        seconds = time.monotonic() - began
        self._worker.report_evaluation(version, epoch, final, accuracy, loss, seconds)
        self.evaluations.append({"step": version, "epoch": epoch, "final": final,
                                 "accuracy": accuracy, "loss": loss, "seconds": seconds})

    @contextlib.contextmanager
    def no_sync(self):
        """Gradient accumulation: backward passes inside only accumulate; the
        first job.backward after it sends the step's gradients."""
        self._no_sync = True
        try:
            yield
        finally:
            self._no_sync = False

    def backward(self, loss):
        """loss.backward() for the open step. `loss` is the MEAN over the
        batch's samples (torch's default reduction); with gradient
        accumulation, the mean over each micro-batch divided by their count.
        Gradients leave for the job as they become final."""
        if not self._open:
            raise RuntimeError("backward() without a batch: take one from job.batches()")
        if self._sent:
            raise RuntimeError("this step's gradients were already sent: accumulate "
                               "micro-batches inside `with job.no_sync():` and call "
                               "job.backward() outside it once, for the last")
        for index, (p, _, _, grad) in enumerate(self._views):
            if p.grad is not grad:  # zero_grad(set_to_none=True) or replaced
                if p.grad is not None:
                    grad.copy_(p.grad)
                else:
                    self._unset[index] = True
                p.grad = grad
        self._backwards += 1
        self._loss_sum += float(loss.detach()) * self._batch
        loss.backward()
        if not self._no_sync:
            self._declare_rest()

    def step(self):
        """Ends the open step: True when it was applied, False when the job
        gave it up (a member lost, a shard rolled back); either way the
        next batch continues from the job's state."""
        if not self._open:
            raise RuntimeError("step() without a batch: take one from job.batches()")
        if self._backwards == 0:
            raise RuntimeError("step() before job.backward(loss)")
        if not self._sent:
            self._declare_rest()
        try:
            applied = self._worker.finish(self._loss_sum, 0)
        finally:
            self._open = False
        self.steps += int(applied)
        return applied

    # ---- the job's state ----
    def state_dict(self):
        """The job's tensors as this worker holds them (copies), by name."""
        return {name: self._flat_params[offset:offset + numel].view(shape).clone()
                for name, shape, offset, numel in self._tensors}

    @property
    def stop_requested(self):
        """Whether this process was asked to go (SIGTERM, or the worker's
        request_stop): after the job, a script that would wait for SIGTERM
        (FERRY_AFTER_FINISH=wait) must not, e.g. once close() served its
        hosted shard until the SIGTERM came."""
        return self._stop_requested or self._worker.await_stop_request(0.0)

    def _catch_sigterm(self):
        """SIGTERM (a pod's eviction, ferry local's chaos) ends the batches
        after the step in flight, so the worker leaves the job cleanly."""
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum, frame):
            self._stop_requested = True
            _ferry.drain()  # not ready, not live: the pod is going away
            self._worker.request_stop()  # leaves after the step in flight

        previous = signal.signal(signal.SIGTERM, handler)
        self._previous_sigterm = signal.SIG_DFL if previous is None else previous

    def close(self, serve_shard=True):
        """Leaves the job (a step in flight is given up); the worker's summary.

        A process that hosts a PS shard (FERRY_HOST_SHARD: `ferry local
        --colocated-shards`) serves it on after its training, for the other
        workers and the coordinator, until SIGTERM (or request_stop), then
        writes the shard's checkpoint; with serve_shard=False (the `with`
        block raised) it stops serving at once."""
        if self.summary is None:
            self.summary = json.loads(self._worker.stop())
        if serve_shard and self._worker.hosts_shard():
            if not self._worker.await_stop_request(0.0):
                print("ferry.torch: training is over for this worker; serving its PS "
                      "shard until SIGTERM", file=sys.stderr, flush=True)
            # Short waits: the interpreter runs the SIGTERM handler between them.
            while not self._worker.await_stop_request(0.25):
                pass
        self._worker.stop_shard()
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        return self.summary

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            with contextlib.suppress(Exception):
                self.close(serve_shard=False)
        return False


def _evaluation_figures(figures):
    """(accuracy, loss) from what job.evaluate's fn returned; ValueError
    naming what is wrong."""
    if not isinstance(figures, dict):
        raise ValueError(f"job.evaluate's fn returned {type(figures).__name__}; it must "
                         "return {'accuracy': ..., 'loss': ...}")
    unknown = sorted(set(figures) - {"accuracy", "loss"})
    missing = sorted({"accuracy", "loss"} - set(figures))
    if unknown or missing:
        raise ValueError("job.evaluate's fn must return exactly the keys 'accuracy' and "
                         f"'loss' (missing: {missing or 'none'}, unknown: {unknown or 'none'})")
    values = {}
    for key in ("accuracy", "loss"):
        try:
            values[key] = float(figures[key])
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"job.evaluate: {key}={figures[key]!r} is not a number") from None
        if not math.isfinite(values[key]):
            raise ValueError(f"job.evaluate: {key} is {values[key]}; figures must be finite")
    if not 0.0 <= values["accuracy"] <= 1.0:
        raise ValueError(f"job.evaluate: accuracy {values['accuracy']} is not in [0, 1]")
    return values["accuracy"], values["loss"]
