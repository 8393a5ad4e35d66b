// stage10_plan_per_batch: see README.md beside this file.
#include "common/driver.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s10::make_stage, argc, argv); }
