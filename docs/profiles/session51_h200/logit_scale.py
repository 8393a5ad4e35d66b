#!/usr/bin/env python3
"""Session 51, call 7: per shape, the scale of the logits that eager PyTorch rounds to bf16 (its gradient's error
grows with it): over the rows, the mean LSE, the mean target logit, and the softmax-weighted spread of the logits,
sqrt(E_p[(z - E_p z)^2]) and sqrt(E_p[z^2]); fp32 logits from the bf16 inputs, 512 rows at a time."""
import json
import sys

import numpy as np
import torch

out = {}
for shape in sys.argv[2:]:
    d = f"{sys.argv[1]}/{shape}"
    e = torch.from_numpy(np.load(f"{d}/e.npy")).cuda().float()  # fp32 files holding bf16 values (bench/lm_data.py)
    c = torch.from_numpy(np.load(f"{d}/c.npy")).cuda().float()
    t = torch.from_numpy(np.load(f"{d}/targets.npy")).cuda()
    sums = {"lse": 0.0, "z_target": 0.0, "spread": 0.0, "rms_p": 0.0, "p_target": 0.0}
    for i in range(0, e.shape[0], 512):
        z = e[i:i + 512] @ c.T
        lse = torch.logsumexp(z, 1)
        p = torch.exp(z - lse[:, None])
        mean = (p * z).sum(1)
        sums["lse"] += lse.sum().item()
        sums["z_target"] += z.gather(1, t[i:i + 512, None]).sum().item()
        sums["spread"] += ((p * (z - mean[:, None]) ** 2).sum(1)).sqrt().sum().item()
        sums["rms_p"] += ((p * z * z).sum(1)).sqrt().sum().item()
        sums["p_target"] += p.gather(1, t[i:i + 512, None]).sum().item()
    out[shape] = {k: v / e.shape[0] for k, v in sums.items()}
    print(shape, {k: round(v, 4) for k, v in out[shape].items()}, flush=True)
json.dump(out, open(sys.argv[1] + "_scale.json", "w"), indent=1)
