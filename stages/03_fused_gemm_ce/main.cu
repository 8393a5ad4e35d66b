// stage03_fused_gemm_ce: see README.md beside this file.
#include "common/driver.h"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s03::make_stage, argc, argv); }
