#!/usr/bin/env bash
# Session 37, call 9 (the warm machine of call 8, its build): python/op_overhead_probe.py in three more processes.
R=$OUT/call9; mkdir -p $R; git status --short > $R/status.txt; for i in 1 2 3; do timeout 100 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe_$i.json > $R/probe_$i.txt 2>&1; echo "rc $?"; python3 -c "
import json,sys
d=json.load(open('$R/op_overhead_probe_$i.json'))
for shape,s in d['shapes'].items():
    c,o=s['c_call']['gpu_ms_median'],s['op_with_backward']['gpu_ms_median']; q=s['queued']; qa=q['ahead_alone']['gpu_ms_median']
    qc,qo=q['c_call']['gpu_ms_median']-qa,q['op_with_backward']['gpu_ms_median']-qa
    print('$i',shape,'%.3f %.3f %+.1f%% queued %.3f %.3f %+.1f%% after %.3f'%(c,o,100*(o/c-1),qc,qo,100*(qo/qc-1),s['split']['op_with_backward']['after_call_ms']))
"; done; cd $OUT && tar czf call9.tgz call9
