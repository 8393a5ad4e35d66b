// stage09_deterministic_products: see README.md beside this file.
#include "common/driver.h"
#include "stages/09_deterministic_products/deterministic_products.h"

int main(int argc, char** argv) { return cce::run_stage_main(cce::s09::make_stage, argc, argv); }
