/*
 * cxx98_c_header.cpp: varflow.h's C API from C++98 (the test
 * cxx_c_header_in_cxx98 compiles it, -Wall -Wextra -Werror). The C++
 * helpers at the end of the header (VF_VARS, vf_var_list_of, the vf_op
 * overloads) need C++11 and are left out there; a user tester found the
 * header refused by C++98 and C++03 compilers where CXX.md said it worked
 * from any C++.
 */
#include <varflow.h>

static int nop(vf_run *run, void *arg)
{
    (void)run;
    (void)arg;
    return 0;
}

int push_one(vf_engine *e, vf_var v)
{
    const vf_var writes[1] = {v};
    vf_op op = vf_op();
    op.fn = nop;
    op.writes.vars = writes;
    op.writes.count = 1;
    return vf_engine_push(e, &op);
}
