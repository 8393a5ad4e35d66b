#!/usr/bin/env bash
# Session 37: op_ab_probe.py's "A", session 36's package (python/cce_stages at 4742619) as a module of its own:
# its cce_scale call adapted to the C interface's new signature (dE alone per call, as before) and its custom ops
# in a namespace of their own (both packages load in one process). Writes cce_stages_s36/__init__.py here.
set -e
cd "$(dirname "$0")"
mkdir -p cce_stages_s36
{
  printf '%s\n' "# Session 37's probe: python/cce_stages/__init__.py as of 4742619 (session 36), its cce_scale call adapted to the C" \
    "# interface's new signature (dE and dC in one call; here one each, as before). Not the package: op_ab_probe.py's \"A\"."
  git show 4742619:python/cce_stages/__init__.py | sed \
    -e 's/lib.cce_scale.argtypes = \[p, ctypes.c_int64, ctypes.c_int32, p, p, ctypes.c_char_p, ctypes.c_int\]/lib.cce_scale.argtypes = [p, ctypes.c_int64, p, ctypes.c_int64, ctypes.c_int32, p, p, ctypes.c_char_p, ctypes.c_int]/' \
    -e 's/_raise(_lib.cce_scale(x.data_ptr(), x.numel(), _DTYPES\[x.dtype\],/_raise(_lib.cce_scale(x.data_ptr(), x.numel(), None, 0, _DTYPES[x.dtype],/' \
    -e 's/"cce_stages::/"cce_stages_s36::/g'
} > cce_stages_s36/__init__.py.new
mv cce_stages_s36/__init__.py.new cce_stages_s36/__init__.py
