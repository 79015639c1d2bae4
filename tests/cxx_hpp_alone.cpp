/*
 * varflow.hpp included alone, for the tests cxx_hpp_needs_cxx17 and
 * cxx_hpp_needs_exceptions (tests/CMakeLists.txt): compiled as C++14, or
 * with -fno-exceptions, it must fail with varflow.hpp's own message.
 */
#include <varflow.hpp>

int main()
{
    return 0;
}
