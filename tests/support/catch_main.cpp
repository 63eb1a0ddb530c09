// The single translation unit that holds Catch2's main (Catch2 v3: link Catch2::Catch2WithMain instead).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
