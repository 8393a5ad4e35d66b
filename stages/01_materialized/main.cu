// stage01_materialized: see README.md beside this file.
#include "common/driver.h"
#include "stages/01_materialized/materialized.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s01::make_stage, argc, argv); }
