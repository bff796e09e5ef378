"""The job's optimizer from a torch optimizer and lr_scheduler.

A job whose model comes from its first worker (--model external) takes that
worker's optimizer as its own: optimizer_spec() turns the torch optimizer
(its class, settings and parameter groups, by tensor name) and, when given,
its lr_scheduler (sampled: the rate of every update of the job, as torch
would set it) into the job's OptimizerSpec, which the shards (PS) or every
ring member then apply. check_optimizer() compares a worker's optimizer with
the job's and names the first difference (docs/pytorch.md).
"""

import math
import warnings

import torch

_ADAM = {torch.optim.Adam: "OPTIMIZER_ADAM", torch.optim.AdamW: "OPTIMIZER_ADAMW"}


def job_updates(spec):
    """(updates of the whole job, updates per epoch) of a sync job whose
    dataset is external:N; (0, 0) when the spec does not say."""
    dataset = spec.get("dataset", "")
    batch = int(spec.get("global_batch", 0) or 0)
    if not dataset.startswith("external:") or batch <= 0:
        return 0, 0
    per_epoch = -(-int(dataset[len("external:"):]) // batch)
    total = per_epoch * int(spec.get("epochs", 0) or 0)
    max_steps = int(spec.get("max_steps", 0) or 0)
    if max_steps > 0:
        total = min(total, max_steps)
    return total, per_epoch


def optimizer_spec(optimizer, model, scheduler=None, interval="step", updates=0,
                   updates_per_epoch=0):
    """The OptimizerSpec (a dict of its JSON form) that computes what
    `optimizer` computes on `model`'s parameters, with `scheduler` (a torch
    lr_scheduler) stepped once per update (interval="step") or once per
    `updates_per_epoch` updates (interval="epoch") over the job's `updates`.
    ValueError naming the setting ferry cannot reproduce."""
    groups = optimizer.param_groups
    first = groups[0]
    spec = {"lr": float(first["lr"]), "weight_decay": float(first["weight_decay"]),
            "momentum": 0.0, "nesterov": False, "beta1": 0.9, "beta2": 0.999,
            "epsilon": 1e-8}
    for group in groups:
        if group.get("maximize", False):
            raise ValueError("optimizer maximize=True is not supported")
        if group.get("differentiable", False):
            raise ValueError("optimizer differentiable=True is not supported")
    if type(optimizer) is torch.optim.SGD:
        _same_in_groups(groups, ["momentum", "nesterov", "dampening"])
        if first.get("dampening", 0):
            raise ValueError(f"optimizer dampening={first['dampening']}: ferry's "
                             "momentum has none")
        spec["kind"] = "OPTIMIZER_MOMENTUM" if first["momentum"] else "OPTIMIZER_SGD"
        spec["momentum"] = float(first["momentum"])
        spec["nesterov"] = bool(first["nesterov"])
    elif type(optimizer) in _ADAM:
        _same_in_groups(groups, ["betas", "eps", "amsgrad"])
        if first.get("amsgrad", False):
            raise ValueError("optimizer amsgrad=True is not supported")
        spec["kind"] = _ADAM[type(optimizer)]
        spec["beta1"], spec["beta2"] = (float(b) for b in first["betas"])
        spec["epsilon"] = float(first["eps"])
    else:
        raise ValueError(f"optimizer {type(optimizer).__name__} is not supported "
                         "(SGD, Adam, AdamW)")
    tables = _lr_tables(optimizer, scheduler, interval, updates, updates_per_epoch) \
        if scheduler is not None else [[] for _ in groups]
    if len(groups) == 1:
        spec["lr_by_step"] = tables[0]
        spec["groups"] = []
        return spec
    names = _group_tensor_names(optimizer, model)
    spec["lr_by_step"] = []
    spec["groups"] = [{"tensors": n, "lr": float(g["lr"]),
                       "weight_decay": float(g["weight_decay"]), "lr_by_step": t}
                      for n, g, t in zip(names, groups, tables)]
    return spec


def _same_in_groups(groups, keys):
    for key in keys:
        values = [g.get(key) for g in groups]
        if any(v != values[0] for v in values[1:]):
            raise ValueError(f"optimizer parameter groups differ in {key} ({values}): ferry "
                             "takes per-group lr and weight_decay only")


def _group_tensor_names(optimizer, model):
    """Each group's parameters by name; ValueError for a parameter the model
    lacks or a model parameter in no group (ferry trains every one)."""
    by_id = {id(p): name for name, p in model.named_parameters()}
    seen = set()
    names = []
    for index, group in enumerate(optimizer.param_groups):
        group_names = []
        for p in group["params"]:
            if id(p) not in by_id:
                raise ValueError(f"optimizer parameter group {index} holds a tensor "
                                 "that is not a parameter of the model")
            group_names.append(by_id[id(p)])
            seen.add(id(p))
        names.append(group_names)
    for name, p in model.named_parameters():
        if id(p) not in seen:
            raise ValueError(f"parameter {name} is in no parameter group of the optimizer: "
                             "ferry trains every parameter")
    return names


def _lr_tables(optimizer, scheduler, interval, updates, updates_per_epoch):
    """Each group's learning rate for updates [0, updates) as `scheduler`
    sets them, without changing the optimizer or the scheduler (their state
    is put back). A constant tail is cut (the last entry holds)."""
    if interval not in ("step", "epoch"):
        raise ValueError(f"scheduler_interval={interval!r}: 'step' or 'epoch'")
    if not hasattr(scheduler, "state_dict") or not hasattr(scheduler, "get_last_lr"):
        raise ValueError(f"scheduler {type(scheduler).__name__} is not supported: ferry "
                         "reproduces schedulers that depend on the step only "
                         "(not ReduceLROnPlateau)")
    if getattr(scheduler, "optimizer", optimizer) is not optimizer:
        raise ValueError("the scheduler belongs to another optimizer")
    if updates <= 0 or (interval == "epoch" and updates_per_epoch <= 0):
        raise ValueError("the job's length is unknown (a torch scheduler needs a sync job "
                         "with --dataset external:N)")
    groups = optimizer.param_groups
    saved_lrs = [g["lr"] for g in groups]
    saved = scheduler.state_dict()
    tables = [[] for _ in groups]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "scheduler.step() before optimizer.step()"
        try:
            for update in range(updates):
                for table, group in zip(tables, groups):
                    table.append(float(group["lr"]))
                if interval == "step" or (update + 1) % updates_per_epoch == 0:
                    scheduler.step()
        finally:
            scheduler.load_state_dict(saved)
            for group, lr in zip(groups, saved_lrs):
                group["lr"] = lr
    for table in tables:
        while len(table) > 1 and table[-1] == table[-2]:
            table.pop()
    return tables


def check_optimizer(ours, job):
    """ValueError naming the first setting in which `ours` (optimizer_spec)
    differs from the job's OptimizerSpec `job` (its JSON form)."""
    kind = job.get("kind", "OPTIMIZER_SGD")
    if ours["kind"] != kind:
        raise ValueError(f"the optimizer is {ours['kind']}; the job's is {kind}")

    def same(name, a, b):
        if not math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12):
            raise ValueError(f"optimizer {name}={a} differs from the job's {name}={b}")

    settings = {"OPTIMIZER_SGD": [], "OPTIMIZER_MOMENTUM": ["momentum"],
                "OPTIMIZER_ADAM": ["beta1", "beta2", "epsilon"],
                "OPTIMIZER_ADAMW": ["beta1", "beta2", "epsilon"]}[kind]
    for name in settings:
        same(name, ours[name], job.get(name, 0))
    if kind == "OPTIMIZER_MOMENTUM" and ours["nesterov"] != bool(job.get("nesterov", False)):
        raise ValueError(f"optimizer nesterov={ours['nesterov']} differs from the job's")
    job_groups = job.get("groups", [])
    if len(ours["groups"]) != len(job_groups):
        raise ValueError(f"the optimizer has {max(1, len(ours['groups']))} parameter "
                         f"group(s); the job's has {max(1, len(job_groups))}")
    pairs = [("", ours, job)] + [(f"group {i} ", a, b) for i, (a, b) in
                                 enumerate(zip(ours["groups"], job_groups))]
    for i, (a, b) in enumerate(zip(ours["groups"], job_groups)):
        if list(a["tensors"]) != list(b.get("tensors", [])):
            raise ValueError(f"optimizer parameter group {i} holds {a['tensors'][:3]}...; "
                             f"the job's holds {b.get('tensors', [])[:3]}...")
    for where, a, b in pairs:
        same(where + "lr", a["lr"], b.get("lr", 0))
        same(where + "weight_decay", a["weight_decay"], b.get("weight_decay", 0))
        ours_table, job_table = a.get("lr_by_step", []), b.get("lr_by_step", [])
        if ours_table and not job_table:
            schedule = job.get("schedule", "SCHEDULE_CONSTANT")
            raise ValueError(f"a torch lr_scheduler was given, but the job's learning rate "
                             f"follows its own schedule ({schedule}); a scheduler sets "
                             "the job's rates only when its worker defines the model "
                             "(--model external)")
        if len(ours_table) != len(job_table) or any(
                not math.isclose(x, float(y), rel_tol=1e-6, abs_tol=1e-12)
                for x, y in zip(ours_table, job_table)):
            if job_table:
                raise ValueError(f"the {where}learning rates of the scheduler differ from "
                                 "the job's (another scheduler or schedule)")
