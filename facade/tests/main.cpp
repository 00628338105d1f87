// Wide console output: Catch v2 indents a wrapped test name's continuation
// lines to just past its first ": ", and a name whose ": " sits near the
// default 80th column made the console reporter wrap forever on a failure
// (session 11: 78 GB of output).
#define CATCH_CONFIG_CONSOLE_WIDTH 200
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
