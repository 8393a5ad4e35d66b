"""cce_stages: the repository's stages as a PyTorch op.

    import cce_stages                      # PYTHONPATH=build/python
    loss = cce_stages.linear_cross_entropy(e, c, targets)          # the final stage
    loss.backward()                        # dE into e.grad, dC into c.grad (tied weights add up)

linear_cross_entropy(e, c, targets, *, ignore_index=-100, reduction="mean", softcap=None,
                     stage=FINAL_STAGE, flags="") computes
loss_i = LSE_j(C_j·E_i) − C_{t_i}·E_i without the [N, V] logits, on the caller's tensors in place
(e [N, D] and c [V, D] bf16 or fp32 on one GPU, contiguous; targets [N] int64), on PyTorch's
current stream. `stage` is any name of the stage table (stage_names()); `flags` its command-line
flags ("--plan sparse").

How the gradient is made (every op is a torch.library.custom_op with a fake, so
torch.compile(fullgraph=True) traces a model that calls it; in eager mode, mean and sum take a
torch.autograd.Function that makes the same calls without the custom op's dispatch):
  - reduction "mean" or "sum": the forward computes the loss and the gradient for an upstream
    gradient of 1 at once (one call of the stage's loss_and_gradient); autograd's backward scales
    them by the upstream gradient, a scalar.
  - reduction "none": the per-token upstream gradient is known only in the backward, so the
    forward computes the loss alone and the backward runs the stage again, loss and gradient,
    with that upstream gradient.
Each call is whole (its gradients are its own), so several forwards before their backwards
(gradient accumulation) are fine. Stage 10's object remembers only its last plan decision per
shape, which plans the next call (its README, "the dense plan before the forward").

A frozen classifier (c.requires_grad False) goes through the ops loss_and_grad_e and grad_e: no
dC is returned or kept for autograd, and c.grad stays None. Stages 09 and 10 skip dC's work; the
others compute dC into scratch released at the end of the call.

The stages' scratch comes from PyTorch's caching allocator (torch.cuda.memory_allocated counts it);
each stage object keeps its scratch between calls. release_scratch() gives it back (the stage objects
are made again, with their scratch, at the next call; their plan decisions and last_stats start over).

Threads and streams: the calls on one device take turns, one at a time on the host, and on the GPU a call
on another stream than the call before it waits for that call's work. A stage object runs on one stream,
whose pool its scratch comes from: a call on another stream makes the object again (as release_scratch
does, for that stage), so code that alternates two streams pays for a new object each call.

last_stats(stage=FINAL_STAGE, flags="", device=None) gives what the last backward of that stage
object (the one linear_cross_entropy(..., stage=, flags=) uses on that device) decided: the plan,
the kept fraction of the (token block, tile) pairs, the eps (a BackwardStats), or None for a stage
that drops nothing (01 to 06) or has run no backward yet.
"""
import atexit
import collections
import contextlib
import ctypes
import math
import os
import threading

import torch

FINAL_STAGE = "10_plan_per_batch"
_ERROR_BYTES = 1024
_DTYPES = {torch.float32: 0, torch.bfloat16: 1}
_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


class _Problem(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64), ("d", ctypes.c_int64), ("v", ctypes.c_int64), ("dtype", ctypes.c_int32),
                ("reduction", ctypes.c_int32), ("softcap", ctypes.c_float), ("ignore_index", ctypes.c_int64)]


class _Stats(ctypes.Structure):
    _fields_ = [("has_stats", ctypes.c_int32), ("plan", ctypes.c_int32), ("units", ctypes.c_int64),
                ("kept_units", ctypes.c_int64), ("decided_kept_fraction", ctypes.c_double), ("eps", ctypes.c_double),
                ("misplaced_mass", ctypes.c_double)]


# What last_stats returns. plan: "sparse" or "dense" (stage 10), None for the stages with one backward.
# kept_fraction: the share of the (token block, tile) pairs (stage 07: tiles) whose products ran (1.0 for
# stage 10's dense plan); decided_kept_fraction: stage 10's decision's share, which chose the plan (the
# same as kept_fraction under the sparse plan; the last decision's for the dense plan before the forward;
# None for the other stages). eps: the eps the backward chose (the sparse plan drops the pairs below it; 0.0:
# none chosen, as by --keep-all and the dense plan before the forward, which decides nothing); drop_eps_log2:
# its log2 (None for 0; the automatic eps's are -8, -8.25, ... -17 up to float rounding). misplaced_mass: with stage 10's automatic eps, the softmax mass per row that its tail correction misplaces (None
# otherwise). units, kept_units: the counts.
BackwardStats = collections.namedtuple(
    "BackwardStats", "plan kept_fraction decided_kept_fraction eps drop_eps_log2 misplaced_mass units kept_units")


def _load_library():
    path = os.environ.get("CCE_CAPI_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "libcce_capi.so")
    if not os.path.exists(path):
        raise ImportError("cce_stages: %s is not there; build the repository (cmake --build build) and import "
                          "from build/python, or set CCE_CAPI_LIBRARY" % path)
    lib = ctypes.CDLL(path)
    lib.cce_stage_names.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.cce_stage_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.cce_stage_new.restype = ctypes.c_void_p
    lib.cce_stage_delete.argtypes = [ctypes.c_void_p]
    p = ctypes.c_void_p
    lib.cce_run.argtypes = [p, ctypes.POINTER(_Problem), p, p, p, p, p, p, p, p, p, ctypes.c_char_p, ctypes.c_int]
    lib.cce_set_allocator.argtypes = [_ALLOCATE, _RELEASE, ctypes.c_char_p, ctypes.c_int]
    lib.cce_last_stats.argtypes = [p, p, ctypes.POINTER(_Stats), ctypes.c_char_p, ctypes.c_int]
    lib.cce_scale.argtypes = [p, ctypes.c_int64, p, ctypes.c_int64, ctypes.c_int32, p, p, ctypes.c_char_p, ctypes.c_int]
    return lib


# The stages' scratch (and cuBLAS's workspace) from PyTorch's caching allocator, on the current
# stream: torch.cuda.memory_allocated() counts it, and a later PyTorch allocation can reuse it.
_ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)


def _torch_allocate(nbytes, device):
    return torch.cuda.caching_allocator_alloc(nbytes, device, torch.cuda.current_stream(device))


def _torch_release(ptr, device):
    torch.cuda.caching_allocator_delete(ptr)


_allocate_callback, _release_callback = _ALLOCATE(_torch_allocate), _RELEASE(_torch_release)  # kept alive
_lib = _load_library()
_local = threading.local()


def _error_buffer():
    """This thread's buffer for the C calls' one-line errors: ctypes lets other threads run during a call."""
    try:
        return _local.error
    except AttributeError:
        _local.error = ctypes.create_string_buffer(_ERROR_BYTES)
        return _local.error


if _lib.cce_set_allocator(_allocate_callback, _release_callback, _error_buffer(), _ERROR_BYTES) != 0:
    raise ImportError("cce_stages: " + _error_buffer().value.decode())
atexit.register(_lib.cce_detach_allocator)
# The calls on a device take turns (a lock per device; the C interface orders them on the GPU across streams,
# cce_capi.cpp says why). A stage object runs on one stream, whose pool of PyTorch's allocator its scratch comes
# from: a call on another stream deletes it (its scratch goes back to that stream's pool, behind the work queued
# there) and makes a new one.
_stages = {}  # (device, stage, flags) -> (stage handle, the stream it runs on), kept for the process
_backward_ran = set()  # the keys of _stages whose handle has run a backward
_device_locks = {}  # device -> threading.Lock, held while a call on that device uses or replaces its handles
_locks_lock = threading.Lock()


def _device_lock(device):
    lock = _device_locks.get(device)
    if lock is None:
        with _locks_lock:
            lock = _device_locks.setdefault(device, threading.Lock())
    return lock


def stage_names(with_backward=False):
    """The stage table's names, in order (with_backward: only those with a backward)."""
    out = ctypes.create_string_buffer(4096)
    if _lib.cce_stage_names(out, len(out)) != 0:
        raise RuntimeError("cce_stages: the stage names do not fit")
    pairs = [item.rsplit(":", 1) for item in out.value.decode().split(",")]
    return [name for name, backward in pairs if backward == "1" or not with_backward]


def _stage(device, stream, name, flags):
    """The stage object of (device, name, flags) for a call on `stream`; the caller holds the device's lock."""
    key = (device, name, flags)
    made = _stages.get(key)
    if made is not None and made[1] == stream:
        return made[0]
    error = _error_buffer()
    with torch.cuda.device(device):
        handle = _lib.cce_stage_new(name.encode(), flags.encode(), error, _ERROR_BYTES)
        if not handle:
            raise ValueError("cce_stages: " + error.value.decode())
        if made is not None:  # made for another stream
            _lib.cce_stage_delete(made[0])
            _backward_ran.discard(key)
    _stages[key] = (handle, stream)
    return handle


def last_stats(stage=FINAL_STAGE, flags="", device=None):
    """What the last backward of `stage` with `flags` on `device` (default: the current CUDA device) decided,
    as a BackwardStats; None for a stage that drops nothing or has run no backward there. Host values the
    backward already read back, except stage 07's kept count, which waits for the current stream."""
    if not isinstance(device, int):
        device = torch.device(device).index if device is not None else None
        device = torch.cuda.current_device() if device is None else device
    key = (device, stage, flags)
    st = _Stats()
    error = _error_buffer()
    with torch.cuda.device(device), _device_lock(device):
        if key not in _backward_ran:
            return None
        stream = ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
        if _lib.cce_last_stats(_stages[key][0], stream, ctypes.byref(st), error, _ERROR_BYTES) != 0:
            raise RuntimeError("cce_stages: " + error.value.decode())
    if not st.has_stats:
        return None
    kept = st.kept_units / st.units if st.units > 0 else None
    decided = st.decided_kept_fraction if st.decided_kept_fraction >= 0.0 else None
    return BackwardStats(plan={0: "sparse", 1: "dense"}.get(st.plan), kept_fraction=kept,
                         decided_kept_fraction=decided, eps=st.eps,
                         drop_eps_log2=math.log2(st.eps) if st.eps > 0.0 else None,
                         misplaced_mass=st.misplaced_mass if st.misplaced_mass >= 0.0 else None, units=st.units,
                         kept_units=st.kept_units)


def release_scratch():
    """Deletes every stage object of the process, so that their scratch returns to PyTorch's caching
    allocator (after the device has finished with it). The next call makes its stage object again."""
    for key, (handle, _) in list(_stages.items()):
        device = key[0]
        with torch.cuda.device(device), _device_lock(device):
            if _stages.get(key, (None,))[0] != handle:
                continue  # replaced meanwhile by another thread's call
            torch.cuda.synchronize()
            _lib.cce_stage_delete(handle)
            del _stages[key]
            _backward_ran.discard(key)


def _check(e, c, targets, reduction):
    """One-line errors for bad input, from the tensors' metadata (torch.compile traces through it)."""
    if not (isinstance(e, torch.Tensor) and isinstance(c, torch.Tensor) and isinstance(targets, torch.Tensor)):
        raise TypeError("cce_stages: e, c and targets must be tensors")
    if e.dim() != 2 or c.dim() != 2 or targets.dim() != 1:
        raise ValueError("cce_stages: e must be [N, D], c [V, D] and targets [N]; got %s, %s, %s"
                         % (tuple(e.shape), tuple(c.shape), tuple(targets.shape)))
    if e.shape[1] != c.shape[1] or targets.shape[0] != e.shape[0]:
        raise ValueError("cce_stages: shapes disagree: e %s, c %s, targets %s"
                         % (tuple(e.shape), tuple(c.shape), tuple(targets.shape)))
    if e.dtype not in _DTYPES or c.dtype != e.dtype:
        raise TypeError("cce_stages: e and c must both be bfloat16 or both float32; got %s and %s" % (e.dtype, c.dtype))
    if targets.dtype != torch.int64:
        raise TypeError("cce_stages: targets must be int64, got %s" % targets.dtype)
    index = e.get_device()  # -1 on the CPU
    if index < 0 or c.get_device() != index or targets.get_device() != index:
        raise ValueError("cce_stages: e, c and targets must be on one CUDA device; got %s, %s, %s"
                         % (e.device, c.device, targets.device))
    if reduction not in _REDUCTIONS:
        raise ValueError("cce_stages: reduction must be mean, sum or none, not %r" % (reduction,))


def _raise(status, error):
    if status == 2:
        raise ValueError("cce_stages: " + error.value.decode())
    if status != 0:
        raise RuntimeError("cce_stages: " + error.value.decode())


_ones = {}  # device index -> a float32 1 there: the upstream gradient of mean and sum's forward


try:  # the current stream's handle as an int, without making a torch.cuda.Stream (a cost per call saved)
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def _on_device(index):
    """The device's context; none to enter when it is the current device already (a cost per call saved)."""
    return contextlib.nullcontext() if index == torch.cuda.current_device() else torch.cuda.device(index)


_problems = {}  # the C call's problem struct per setting, made once


def _problem(n, d, v, dtype, reduction, softcap, ignore_index):
    key = (n, d, v, dtype, reduction, softcap, ignore_index)
    made = _problems.get(key)
    if made is None:
        made = _problems[key] = _Problem(n, d, v, _DTYPES[dtype], _REDUCTIONS[reduction], float(softcap),
                                         int(ignore_index))
    return made


def _run(e, c, targets, upstream, stage, flags, reduction, ignore_index, softcap, with_grad, with_dc=True):
    """One call of the stage: the loss; with_grad: then dE and (with_dc) dC for `upstream`. The C interface
    checks the targets (a synchronization, last before the stage runs). Written for the host time before the
    stage's first kernel, which the GPU waits for when nothing else is queued (python/WORKLOG.md)."""
    if not (e.is_contiguous() and c.is_contiguous() and targets.is_contiguous()):
        e, c, targets = e.contiguous(), c.contiguous(), targets.contiguous()
    n, v = e.shape[0], c.shape[0]
    loss = e.new_empty((n,) if reduction == "none" else (), dtype=torch.float32)
    de = torch.empty_like(e) if with_grad else None
    dc = torch.empty_like(c) if with_grad and with_dc else None
    if n == 0:  # nothing to compute: the stages refuse N = 0
        loss.zero_()
        for t in (de, dc):
            if t is not None:
                t.zero_()
        return loss, de, dc
    problem = _problem(n, e.shape[1], v, e.dtype, reduction, softcap, ignore_index)
    index = e.get_device()
    if with_grad and upstream is not _ones.get(index):  # the ones of mean and sum are float32 there already
        upstream = upstream.to(device=e.device, dtype=torch.float32).contiguous()
    error = _error_buffer()
    with _on_device(index):
        stream = _raw_stream(index)
        with _device_lock(index):
            handle = _stage(index, stream, stage, flags)
            # ctypes passes an int as a void*, None as NULL; no LSE wanted: the stage object keeps one.
            status = _lib.cce_run(handle, ctypes.byref(problem), e.data_ptr(), c.data_ptr(), targets.data_ptr(),
                                  upstream.data_ptr() if with_grad else None, loss.data_ptr(), None,
                                  de.data_ptr() if de is not None else None, dc.data_ptr() if dc is not None else None,
                                  stream, error, _ERROR_BYTES)
            if with_grad and status == 0:
                _backward_ran.add((index, stage, flags))
    _raise(status, error)
    return loss, de, dc


# ---- the ops ----

@torch.library.custom_op("cce_stages::loss_and_grad", mutates_args=())
def _loss_and_grad(e: torch.Tensor, c: torch.Tensor, targets: torch.Tensor, stage: str, flags: str, reduction: str,
                   ignore_index: int, softcap: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _run(e, c, targets, _one(e.get_device()), stage, flags, reduction, ignore_index, softcap, True)


def _one(index):
    if index not in _ones:
        _ones[index] = torch.ones((), device=torch.device("cuda", index), dtype=torch.float32)
    return _ones[index]


@_loss_and_grad.register_fake
def _(e, c, targets, stage, flags, reduction, ignore_index, softcap):
    return e.new_empty((), dtype=torch.float32), torch.empty_like(e), torch.empty_like(c)


@torch.library.custom_op("cce_stages::loss", mutates_args=())
def _loss(e: torch.Tensor, c: torch.Tensor, targets: torch.Tensor, stage: str, flags: str, reduction: str,
          ignore_index: int, softcap: float) -> torch.Tensor:
    return _run(e, c, targets, None, stage, flags, reduction, ignore_index, softcap, False)[0]


@_loss.register_fake
def _(e, c, targets, stage, flags, reduction, ignore_index, softcap):
    return e.new_empty((e.shape[0],) if reduction == "none" else (), dtype=torch.float32)


@torch.library.custom_op("cce_stages::grad", mutates_args=())
def _grad(e: torch.Tensor, c: torch.Tensor, targets: torch.Tensor, upstream: torch.Tensor, stage: str, flags: str,
          reduction: str, ignore_index: int, softcap: float) -> tuple[torch.Tensor, torch.Tensor]:
    _, de, dc = _run(e, c, targets, upstream, stage, flags, reduction, ignore_index, softcap, True)
    return de, dc


@_grad.register_fake
def _(e, c, targets, upstream, stage, flags, reduction, ignore_index, softcap):
    return torch.empty_like(e), torch.empty_like(c)


# A frozen classifier: the same without dC (see the module's docstring).
@torch.library.custom_op("cce_stages::loss_and_grad_e", mutates_args=())
def _loss_and_grad_e(e: torch.Tensor, c: torch.Tensor, targets: torch.Tensor, stage: str, flags: str,
                     reduction: str, ignore_index: int, softcap: float) -> tuple[torch.Tensor, torch.Tensor]:
    loss, de, _ = _run(e, c, targets, _one(e.get_device()), stage, flags, reduction, ignore_index, softcap, True,
                       with_dc=False)
    return loss, de


@_loss_and_grad_e.register_fake
def _(e, c, targets, stage, flags, reduction, ignore_index, softcap):
    return e.new_empty((), dtype=torch.float32), torch.empty_like(e)


@torch.library.custom_op("cce_stages::grad_e", mutates_args=())
def _grad_e(e: torch.Tensor, c: torch.Tensor, targets: torch.Tensor, upstream: torch.Tensor, stage: str,
            flags: str, reduction: str, ignore_index: int, softcap: float) -> torch.Tensor:
    return _run(e, c, targets, upstream, stage, flags, reduction, ignore_index, softcap, True, with_dc=False)[1]


@_grad_e.register_fake
def _(e, c, targets, upstream, stage, flags, reduction, ignore_index, softcap):
    return torch.empty_like(e)


# The backward of mean and sum: the forward's dE and dC (made for an upstream gradient of 1) times autograd's
# upstream gradient g. In eager mode they are scaled in place, both in one C call, by a kernel that reads g on the
# device and returns at once when it is 1, as for loss.backward(): no pass over dC's V*D values, no synchronization
# (capi_kernels.cu); they are the op's own outputs, which nothing else holds. Traced (torch.compile, opcheck,
# a tensor subclass), a plain multiplication that the compiler fuses. dc may be None (a frozen classifier).
def _scaled(g, de, dc):
    if type(de) is not torch.Tensor or torch.compiler.is_compiling() or _dispatch_mode() is not None:
        g = g.to(torch.float32)  # a 0-dim float32 factor keeps the gradients' dtype (one rounding)
        return de * g, dc * g if dc is not None else None
    index = de.get_device()
    if g.dtype is not torch.float32 or g.get_device() != index:  # loss.backward()'s g is float32 there already
        g = g.to(device=de.device, dtype=torch.float32)
    error = _error_buffer()
    with _on_device(index):
        _raise(_lib.cce_scale(de.data_ptr(), de.numel(), dc.data_ptr() if dc is not None else None,
                              dc.numel() if dc is not None else 0, _DTYPES[de.dtype], g.data_ptr(), _raw_stream(index),
                              error, _ERROR_BYTES), error)
    return de, dc


try:
    from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode
except ImportError:  # then always the traced form
    def _dispatch_mode():
        return True


def _setup_loss_and_grad(ctx, inputs, output):
    e, c, targets, stage, flags, reduction, ignore_index, softcap = inputs
    ctx.set_materialize_grads(False)  # dE and dC's own upstream gradients, unused: None, not [N, D] and [V, D] zeros
    ctx.save_for_backward(e, c, targets, output[1], output[2])
    ctx.settings = (stage, flags, reduction, ignore_index, softcap)
    ctx.scaled = False


def _backward_loss_and_grad(ctx, g_loss, g_de, g_dc):
    if g_loss is None:  # a backward through dE or dC alone: the loss has no gradient to pass on
        return None, None, None, None, None, None, None, None
    e, c, targets, de, dc = ctx.saved_tensors
    if ctx.scaled:  # a second backward through this loss (retain_graph): the first scaled de and dc in place
        de, dc = _grad(e, c, targets, g_loss.to(torch.float32), *ctx.settings)
        return de, dc, None, None, None, None, None, None
    ctx.scaled = True
    return _scaled(g_loss, de, dc) + (None, None, None, None, None, None)


_loss_and_grad.register_autograd(_backward_loss_and_grad, setup_context=_setup_loss_and_grad)


def _setup_loss_and_grad_e(ctx, inputs, output):
    e, c, targets, stage, flags, reduction, ignore_index, softcap = inputs
    ctx.set_materialize_grads(False)  # as _setup_loss_and_grad
    ctx.save_for_backward(e, c, targets, output[1])
    ctx.settings = (stage, flags, reduction, ignore_index, softcap)
    ctx.scaled = False


def _backward_loss_and_grad_e(ctx, g_loss, g_de):
    if g_loss is None:  # as _backward_loss_and_grad
        return None, None, None, None, None, None, None, None
    e, c, targets, de = ctx.saved_tensors
    if ctx.scaled:  # as _backward_loss_and_grad
        return _grad_e(e, c, targets, g_loss.to(torch.float32), *ctx.settings), None, None, None, None, None, None, None
    ctx.scaled = True
    return _scaled(g_loss, de, None)[0], None, None, None, None, None, None, None


_loss_and_grad_e.register_autograd(_backward_loss_and_grad_e, setup_context=_setup_loss_and_grad_e)


def _setup_loss(ctx, inputs, output):
    e, c, targets, stage, flags, reduction, ignore_index, softcap = inputs
    ctx.save_for_backward(e, c, targets)
    ctx.settings = (stage, flags, reduction, ignore_index, softcap)


def _backward_loss(ctx, g_loss):
    e, c, targets = ctx.saved_tensors
    if not ctx.needs_input_grad[1]:  # a frozen classifier
        return _grad_e(e, c, targets, g_loss.to(torch.float32), *ctx.settings), None, None, None, None, None, None, None
    de, dc = _grad(e, c, targets, g_loss.to(torch.float32), *ctx.settings)
    return de, dc, None, None, None, None, None, None


_loss.register_autograd(_backward_loss, setup_context=_setup_loss)


# The eager path of mean and sum with a gradient: the same _run as the custom ops, without torch.library's
# dispatch, whose fixed cost per call (about 0.1 ms on the host, before the first kernel) shows at small shapes.
# The stage runs first (linear_cross_entropy); this Function only ties its loss to e and c afterwards, while the
# GPU works on what the call queued. dE and dC stay on ctx (they are no output), scaled in place by the backward;
# a second backward through the same loss (retain_graph) runs the stage again, as the custom ops do. The loss
# comes inside `made`, not as a tensor argument, which autograd would hand back as a view of itself (a cost per call).
class _EagerLossAndGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, e, c, targets, made):
        # made: the stage's loss; (dE, dC or None), made with it; (stage, flags, reduction, ignore_index, softcap)
        loss, ctx.gradients, ctx.settings = made
        ctx.save_for_backward(e, c, targets)
        return loss

    @staticmethod
    def backward(ctx, g_loss):
        if ctx.gradients is None:  # a second backward through this loss: the first scaled dE and dC in place
            return _backward_loss(ctx, g_loss)[:3] + (None,)
        de, dc = ctx.gradients
        ctx.gradients = None
        return _scaled(g_loss, de, dc) + (None, None)


def _eager(*tensors):
    """Whether the eager path applies: plain tensors, not traced (torch.compile, opcheck, a dispatch mode)."""
    return (all(type(t) is torch.Tensor for t in tensors) and not torch.compiler.is_compiling()
            and _dispatch_mode() is None)


def linear_cross_entropy(e, c, targets, *, ignore_index=-100, reduction="mean", softcap=None, stage=FINAL_STAGE,
                         flags=""):
    """The cross-entropy of the logits e·cᵀ against targets, without the logits (see the module's docstring)."""
    _check(e, c, targets, reduction)
    cap = 0.0 if softcap is None else float(softcap)
    wants_grad = torch.is_grad_enabled() and (e.requires_grad or c.requires_grad)
    if wants_grad and reduction != "none" and _eager(e, c, targets):
        loss, de, dc = _run(e, c, targets, _one(e.get_device()), stage, flags, reduction, ignore_index, cap, True,
                            with_dc=c.requires_grad)
        settings = (stage, flags, reduction, int(ignore_index), cap)
        return _EagerLossAndGrad.apply(e, c, targets, (loss, (de, dc), settings))
    if wants_grad and reduction != "none":
        if not c.requires_grad:  # a frozen classifier: no dC kept
            return _loss_and_grad_e(e, c, targets, stage, flags, reduction, int(ignore_index), cap)[0]
        loss, _, _ = _loss_and_grad(e, c, targets, stage, flags, reduction, int(ignore_index), cap)
        return loss
    return _loss(e, c, targets, stage, flags, reduction, int(ignore_index), cap)
