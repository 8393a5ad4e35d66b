// stage05_lse_locks: see README.md beside this file.
#include "common/driver.h"
#include "stages/05_lse_locks/lse_locks.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s05::make_stage, argc, argv); }
