// stage04_indexed_dot: see README.md beside this file.
#include "common/driver.h"
#include "stages/04_indexed_dot/indexed_dot.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s04::make_stage, argc, argv); }
