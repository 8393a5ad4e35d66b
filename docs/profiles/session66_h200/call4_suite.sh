#!/usr/bin/env bash
# Session 66, call 4 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): the tree as committed (the gather in the
# pipeline, its experiment switches gone): the engine's new gather tests first, then the whole GPU suite.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call4
build /tmp/build . > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 60 ctest -R TileEngineGather --output-on-failure) > $R/ctest_gather.log 2>&1
echo "gather tests rc $?: $(grep -E 'tests passed' $R/ctest_gather.log)"; grep -E "gather of|Failed|off" $R/ctest_gather.log | head
gpu_suite 585
cd $OUT && tar czf call4.tgz call4 && rm -rf call4
