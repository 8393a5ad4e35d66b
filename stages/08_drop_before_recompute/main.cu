// stage08_drop_before_recompute: see README.md beside this file.
#include "common/driver.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s08::make_stage, argc, argv); }
