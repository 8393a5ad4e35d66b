// stage02_online_softmax: see README.md beside this file.
#include "common/driver.h"
#include "stages/02_online_softmax/online_softmax.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s02::make_stage, argc, argv); }
