// stage06_fused_backward: see README.md beside this file.
#include "common/driver.h"
#include "stages/06_fused_backward/fused_backward.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s06::make_stage, argc, argv); }
