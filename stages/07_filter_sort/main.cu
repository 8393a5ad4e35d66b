// stage07_filter_sort: see README.md beside this file.
#include "common/driver.h"
#include "stages/07_filter_sort/filter_sort.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s07::make_stage, argc, argv); }
