/* hello.cpp: hello.c in C++ (varflow.hpp): c = a + b, then d = a + c. */
#include <cstdio>
#include <varflow.hpp>

int main()
{
    double a = 1, b = 2, c = 0, d = 0;
    try {
        varflow::engine eng; /* defaults and VF_* env vars; ~engine waits */
        varflow::var va = eng.new_var(), vb = eng.new_var(), vc = eng.new_var(),
                     vd = eng.new_var(); /* ~var frees */
        eng.push({va, vb}, {vc}, [&] { c = a + b; });
        eng.push({va, vc}, {vd}, [&] { d = a + c; }); /* reads c: after */
        eng.wait(vd); /* throws varflow::op_failed if an op failed (threw) */
        std::printf("d = %g (ok)\n", d);
    } catch (const varflow::error &e) { /* the code, its name, the detail */
        std::printf("d = %g (%s)\n", d, e.what());
        return 1;
    }
    return 0;
}
