"""Session 37, call 4: the host's time inside cce_run, span by span, from host_marks.patch's clock marks (one
"MARKS" line on stderr per call). 3 warm-up calls then 30, a synchronization before each, at lm32k's and gemma2's
shapes: the bare C call, then the op with its backward. Run with stderr to a file; marks_summary.py reads it.

    python3 marks_driver.py BUILD/python 2> marks.log"""
import ctypes, sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs
for shape, folder in (("lm32k", "/tmp/lm-gen/lm32k"), ("gemma2", "/tmp/cce-inputs/gemma2")):
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    n, d, v = e.shape[0], e.shape[1], c.shape[0]
    loss, lse = torch.empty((), device="cuda"), torch.empty(n, device="cuda")
    de, dc, one = torch.empty_like(e), torch.empty_like(c), torch.ones((), device="cuda")
    handle = cs._stage(0, cs.FINAL_STAGE, "")
    problem = cs._Problem(n, d, v, 1, 0, 0.0, -100)
    p = lambda x: ctypes.c_void_p(x.data_ptr())
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    raw = lambda: cs._raise(cs._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse),
                                            p(de), p(dc), stream, cs._error, cs._ERROR_BYTES))
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    def op():
        E.grad = None; C.grad = None
        cs.linear_cross_entropy(E, C, t).backward()
    for case, fn in (("c_call", raw), ("op", op)):
        for rep in range(33):
            torch.cuda.synchronize()
            print("CASE %s %s %s" % (shape, case, "warm" if rep < 3 else "timed"), file=sys.stderr, flush=True)
            fn()
            torch.cuda.synchronize()
    del e, c, E, C, de, dc
