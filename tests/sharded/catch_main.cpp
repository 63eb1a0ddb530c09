// Catch2 main of the sharded GPU tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
