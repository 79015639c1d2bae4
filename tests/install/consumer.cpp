/*
 * consumer.cpp: consumer.c's check in C++, through the installed
 * varflow.hpp: built by scripts/check-install with `pkg-config --cflags
 * --libs varflow` and with find_package(varflow) and varflow::cxx (which
 * brings C++17), with -Wall -Wextra -Wpedantic -Werror, so a header that is
 * not warning-clean for C++ users fails here too.
 *
 * It runs the seed program A=2; B=A+1; C=A+2; D=B*C with lambdas on a
 * two-worker pooled engine and expects D == 12 with D's version at 1, then
 * an op that throws: the wait must throw varflow::op_failed carrying the
 * exception's message, and the op reading its output must be skipped.
 */
#include <cstdio>
#include <stdexcept>
#include <string>

#include <varflow.hpp>

int main()
{
    try {
        vf_config cfg{};
        cfg.type = VF_ENGINE_POOLED;
        cfg.cpu_workers = 2;
        varflow::engine eng(cfg);
        varflow::var a = eng.new_var(), b = eng.new_var(), c = eng.new_var(),
                     d = eng.new_var();
        int va = 0, vb = 0, vc = 0, vd = 0;
        eng.push({}, {a}, [&] { va = 2; });
        eng.push({a}, {b}, [&] { vb = va + 1; });
        eng.push({a}, {c}, [&] { vc = va + 2; });
        eng.push({b, c}, {d}, [&] { vd = vb * vc; });
        eng.wait(d);
        bool ok = vd == 12 && d.version() == 1;

        bool skipped = true;
        std::string caught;
        eng.push(
            {}, {a}, [] { throw std::runtime_error("boom"); },
            varflow::options{}.set_name("thrower"));
        eng.push({a}, {b}, [&] { skipped = false; });
        try {
            eng.wait(b);
        } catch (const varflow::op_failed &e) {
            caught = e.op_message();
        }
        ok = ok && skipped && caught == "boom";
        std::printf("consumer.cpp: varflow %d.%d.%d, %s engine: D = %d "
                    "(want 12), a throwing op failed with \"%s\" (want "
                    "\"boom\"): %s\n",
                    VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH,
                    vf_engine_type_name(eng.kind()), vd, caught.c_str(),
                    ok ? "ok" : "FAILED");
        return ok ? 0 : 1;
    } catch (const varflow::error &e) {
        std::fprintf(stderr, "consumer.cpp: %s\n", e.what());
        return 1;
    }
}
