/*
 * cxx_var_list_dangles.cpp: a varflow::var_list kept in a variable from a
 * braced list points at the list's array, gone at the end of its
 * declaration; clang says so (-Wdangling, from the lifetimebound on
 * var_list's constructor). The test cxx_var_list_dangling_warns compiles
 * it with clang++ and expects that warning (a user tester's push read
 * garbage handles, and neither compiler said a word).
 */
#include <varflow.hpp>

void push_later(varflow::engine_ref eng, vf_var a, vf_var b)
{
    varflow::var_list w{a, b}; // dangles: the braces' array is gone below
    eng.push({}, w, [] {});
}
